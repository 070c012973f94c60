"""The sweep's decision: the highest rate before the first step that did not pass."""

from __future__ import annotations

from pathlib import Path

from harness.sweep import MIN_STEP_REQUESTS, step_duration_s, step_rates
from reports.sweep import StepOutcome, SweepStep, highest_passing, render_sweep, result_line


def step(rate: float, outcome: StepOutcome, out: Path = Path(".")) -> SweepStep:
    return SweepStep(
        rate_per_s=rate,
        run_dir=out / f"step-{rate:g}",
        outcome=outcome,
        explanation="",
        num_sent=10,
        num_ok=10,
        achieved_per_s=rate,
        p95_ttft_ms=100.0 * rate,
        p95_ttft_from_intended_ms=110.0 * rate,
        goodput=1.0,
        lag_p99_ms=1.0,
    )


def test_the_rate_before_the_first_failure_is_the_answer() -> None:
    steps = [step(1, StepOutcome.PASS), step(2, StepOutcome.PASS), step(4, StepOutcome.FAIL)]
    best = highest_passing(steps)
    assert best is not None and best.rate_per_s == 2
    assert result_line(steps) == "highest rate meeting the SLO: 2 requests/s (failed at 4/s)"


def test_a_pass_after_a_failure_does_not_count() -> None:
    best = highest_passing([step(1, StepOutcome.PASS), step(2, StepOutcome.FAIL), step(4, StepOutcome.PASS)])
    assert best is not None and best.rate_per_s == 1


def test_a_lagging_client_makes_the_answer_a_lower_bound() -> None:
    steps = [step(1, StepOutcome.PASS), step(2, StepOutcome.HARNESS_ERROR)]
    assert highest_passing(steps).rate_per_s == 1
    assert "at least 1" in result_line(steps) and "client" in result_line(steps)


def test_no_passing_step_no_answer() -> None:
    assert highest_passing([step(1, StepOutcome.FAIL)]) is None
    assert result_line([step(1, StepOutcome.FAIL)]).startswith("no rate met the SLO")


def test_rates_rise_by_the_factor() -> None:
    assert step_rates(start_per_s=0.5, factor=2.0, num_steps=4) == [0.5, 1.0, 2.0, 4.0]


def test_the_page_has_the_plot_and_a_row_per_step(tmp_path: Path) -> None:
    steps = [step(1, StepOutcome.PASS, tmp_path), step(2, StepOutcome.FAIL, tmp_path)]
    page = render_sweep(steps, tmp_path / "sweep.html", ttft_objective_ms=900, goodput_floor=0.4, target="t")
    text = page.read_text()
    assert 'id="sweep-ttft"' in text and 'id="sweep-goodput"' in text
    assert text.count('href="step-') == 2 and "highest rate meeting the SLO: 1 requests/s" in text


def test_a_slow_step_lasts_long_enough_to_offer_its_requests() -> None:
    assert step_duration_s(0.1, 15.0) == MIN_STEP_REQUESTS / 0.1  # 15 s at 0.1/s: one or two requests
    assert step_duration_s(8.0, 15.0) == 15.0  # 120 requests: the duration asked for
