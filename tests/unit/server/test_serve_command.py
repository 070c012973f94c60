"""`kvgate serve`: its flags, and a usage error for a negative worker count."""

import pytest

from harness.cli import build_parser
from harness.commands import serve


def test_serve_flags_parse_to_what_serve_needs():
    args = build_parser().parse_args(["serve", "--config", "c.toml", "--port", "9001", "--workers", "2"])
    assert (args.func, args.config, args.host, args.port, args.workers) == (serve.run, "c.toml", "127.0.0.1", 9001, 2)
    assert build_parser().parse_args(["serve", "--config", "c.toml"]).workers == 0


def test_a_negative_worker_count_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["serve", "--config", "c.toml", "--workers", "-1"])
    assert exit_info.value.code == 2 and "positive number of workers" in capsys.readouterr().err
