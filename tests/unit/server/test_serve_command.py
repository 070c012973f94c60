"""`kvgate serve`: its flags, a usage error for a negative worker count, and what it refuses to
start with (no admin key, the public dev key, a busy port)."""

import socket

import pytest

from harness.cli import build_parser
from harness.commands import serve
from record.errors import StartupError
from reference_engine import load_config, with_overrides
from reference_engine.config import DEV_ADMIN_KEY
from reference_engine.server import http_edge, with_admin_key


def test_serve_flags_parse_to_what_serve_needs():
    args = build_parser().parse_args(["serve", "--config", "c.toml", "--port", "9001", "--workers", "2"])
    assert (args.func, args.config, args.host, args.port, args.workers) == (serve.run, "c.toml", "127.0.0.1", 9001, 2)
    assert build_parser().parse_args(["serve", "--config", "c.toml"]).workers is None  # the config's [server] workers


def test_a_negative_worker_count_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["serve", "--config", "c.toml", "--workers", "-1"])
    assert exit_info.value.code == 2 and "positive number of workers" in capsys.readouterr().err


def test_an_engine_starts_only_with_an_admin_key_of_its_own_or_as_a_dev_run():
    config = load_config("configs/default.toml")
    with pytest.raises(StartupError, match="no admin key.*KVGATE_ADMIN_KEY.*--dev"):
        with_admin_key(config)
    with pytest.raises(StartupError, match="public dev key"):
        with_admin_key(config, DEV_ADMIN_KEY)
    assert with_admin_key(config, dev=True).server.admin_key == DEV_ADMIN_KEY
    from_config = with_overrides(config, {"server.admin_key": "sk-from-config"})
    assert with_admin_key(from_config).server.admin_key == "sk-from-config"
    assert with_admin_key(from_config, "sk-from-env").server.admin_key == "sk-from-env"  # the environment wins


def test_a_busy_port_is_a_startup_error_not_a_crash():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(StartupError, match=r"cannot listen on 127\.0\.0\.1:\d+: .*pick another --port"):
            http_edge.listen("127.0.0.1", taken.getsockname()[1])


def test_a_pd_pair_is_one_process_not_a_pool_of_workers():
    from reference_engine.server import serve as serve_engine

    with pytest.raises(StartupError, match=r"\[pd\] enabled.*one process.*without workers"):
        serve_engine(load_config("configs/pd.toml"), port=0, dev=True, workers=2)
