from __future__ import annotations

import csv
from pathlib import Path

from harness.locust_process import OPEN_LOOP_LOCUSTFILE, Master, RowTail, locust_command
from harness.scenario_catalog import scenarios_dir, select
from record.run_record import REQUEST_COLUMNS


def test_the_tail_returns_only_complete_new_rows(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    tail = RowTail(path)
    assert tail.read() == []
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=REQUEST_COLUMNS)
        w.writeheader()
        w.writerow({"request_id": "a", "status": "ok"})
        f.write("b,,short_qa,lo")  # a row still being written
        f.flush()
        assert [r["request_id"] for r in tail.read()] == ["a"]
        f.write("ad\n")
    rows = tail.read()
    assert [(r["request_id"], r["scenario"], r["phase"]) for r in rows] == [("b", "short_qa", "load")]
    assert tail.read() == []


COMMON = {
    "host": "http://127.0.0.1:1",
    "users": 4,
    "spawn_rate": 2.0,
    "duration_s": 10.4,
    "stop_timeout_s": 5,
    "processes": 0,
    "html_path": None,
}


def test_the_mixed_default_runs_the_directory_and_named_scenarios_name_their_classes(tmp_path: Path) -> None:
    mixed = locust_command(scenarios=select(scenarios_dir(), []), mixed_dir=scenarios_dir(), **COMMON)
    assert mixed[mixed.index("-f") + 1] == str(scenarios_dir()) and mixed[-1] == "--only-summary"
    assert mixed[mixed.index("-t") + 1] == "10s" and "--headless" in mixed
    assert mixed[mixed.index("--stop-timeout") + 1] == "5s"
    fractional = locust_command(scenarios=[], mixed_dir=scenarios_dir(), **{**COMMON, "stop_timeout_s": 1.5})
    assert fractional[fractional.index("--stop-timeout") + 1] == "2s"  # locust refuses "1.5"
    named = locust_command(
        scenarios=select(scenarios_dir(), ["step_load", "short_qa"]),
        mixed_dir=None,
        **{**COMMON, "processes": 2, "html_path": tmp_path / "l.html"},
    )
    assert named[-2:] == ["StepLoad", "ShortQA"] and named[named.index("--processes") + 1] == "2"
    assert named[named.index("-f") + 1].endswith("step_load.py," + str(scenarios_dir() / "short_qa.py"))


def test_an_open_loop_runs_its_locustfile_whose_shape_decides_users_and_end() -> None:
    cmd = locust_command(scenarios=[], mixed_dir=None, **{**COMMON, "processes": 2}, open_loop=True)
    assert cmd[cmd.index("-f") + 1] == str(OPEN_LOOP_LOCUSTFILE) and OPEN_LOOP_LOCUSTFILE.is_file()
    assert not {"-u", "-r", "-t"} & set(cmd) and cmd[cmd.index("--processes") + 1] == "2"


def test_a_master_for_workers_on_other_hosts_binds_where_they_reach_it() -> None:
    short_qa = select(scenarios_dir(), ["short_qa"])
    cmd = locust_command(scenarios=short_qa, mixed_dir=None, **COMMON, master=Master("10.0.0.3", 5557, 2, 30.5))
    master = cmd[cmd.index("--master") :]
    assert master[:9] == ["--master", "--master-bind-host", "10.0.0.3", "--master-bind-port", "5557"] + [
        "--expect-workers",
        "2",
        "--expect-workers-max-wait",
        "31",
    ]
    assert "--processes" not in cmd
