"""`[regression]` budgets: the defaults load, a typo or a wrong sign is an error."""

from __future__ import annotations

import pytest

from gates import load_thresholds
from gates.budgets import BUDGET_KEYS, parse_budget
from record.errors import ConfigError, UnknownNameError


def test_the_defaults_have_every_budget():
    budgets = load_thresholds().budgets
    assert set(budgets) == set(BUDGET_KEYS)
    assert (budgets["ttft_p95"].amount, budgets["ttft_p95"].relative) == (0.05, True)
    assert (budgets["preemptions"].amount, budgets["preemptions"].relative) == (0.0, False)


def test_a_user_file_overrides_one_budget(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text('[regression]\nttft_p95 = "+20%"\n')
    budgets = load_thresholds(path).budgets
    assert budgets["ttft_p95"].amount == 0.2 and budgets["goodput"].amount == 0.05


@pytest.mark.parametrize(
    ("text", "error", "says"),
    [
        ('ttft_p59 = "+10%"', UnknownNameError, "ttft_p95"),
        ('ttft_p95 = "10%"', ConfigError, "higher is worse"),
        ('goodput = "+5%"', ConfigError, "lower is worse"),
        ("ttft_p95 = 10", ConfigError, "quoted string"),
        ('ttft_p95 = "+ten%"', ConfigError, "quoted string"),
        ('gate_values = "+10%"', ConfigError, "no sign"),
    ],
)
def test_a_malformed_budget_is_an_error(tmp_path, text, error, says):
    path = tmp_path / "t.toml"
    path.write_text(f"[regression]\n{text}\n")
    with pytest.raises(error, match=says):
        load_thresholds(path)


def test_a_budget_allows_what_it_says():
    relative, absolute = parse_budget("ttft_p95", "+10%"), parse_budget("preemptions", "+0")
    assert not relative.exceeded_by(9.0, 100.0) and relative.exceeded_by(11.0, 100.0)
    assert absolute.exceeded_by(1.0, 0.0) and not absolute.exceeded_by(0.0, 0.0)
