"""A store of good runs to gate later runs against: plain run records in a directory CI can cache.

    <store>/<name>/<config>/<run_id>/      meta.json, the CSV tables, verdict.json (no reports)

    save_runs([run_dir, matrix_out], Path("baselines"), "main", keep=10)
    find_runs([Path("baselines/main")])     # every run record at or below each path

`<name>` is what a workflow keys its cache on (`main`: the last green runs of the main branch);
`<config>` groups the runs of one config (its file's stem, else its policy) so that a matrix's
runs are saved side by side and each later run finds its own config's repeats. Saving copies
the record and its verdict only (the report and chart library are rebuilt from them), refuses
a partial record (a run that ended early, or the harness failed), and with `keep` drops the
oldest runs of each config beyond that many. `harness/baseline.py` is another thing: the
unloaded requests at the start of a run.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from record.errors import KvgateError
from record.run_record import TABLES, RunMeta

SAVED_FILES = ("meta.json", *(f"{table}.csv" for table in TABLES), "verdict.json", "engine_config.json")


def config_name(meta: RunMeta) -> str:
    """The name a run's config goes by: its file's stem, else its policy, else its run id."""
    return Path(meta.config_path).stem or meta.policy or meta.run_id


def find_runs(paths: Sequence[Path]) -> list[Path]:
    """The run directories given: each path that is one, else every one below it (sorted). A
    path with none is an error that names it."""
    found: list[Path] = []
    for path in map(Path, paths):
        if (path / "meta.json").is_file():
            found.append(path)
            continue
        below = sorted(meta.parent for meta in path.rglob("meta.json")) if path.is_dir() else []
        if not below:
            raise KvgateError(f"{path}: no run record there (no meta.json at or below it)")
        found += below
    return list(dict.fromkeys(found))


def save_runs(runs: Sequence[Path], store: Path, name: str, keep: int | None = None) -> list[Path]:
    """Copy the run records at or below `runs` into `store/name/<config>/<run_id>/`; then keep
    the newest `keep` of each config. The directories saved."""
    if not name or "/" in name or name.startswith("."):
        raise KvgateError(f"--name {name!r}: a plain directory name such as main")
    saved = []
    for run_dir in find_runs(runs):
        meta = RunMeta.model_validate_json((run_dir / "meta.json").read_text())
        if (note := meta.ended_early or meta.harness_error) is not None:
            raise KvgateError(f"{run_dir}: a partial record is no baseline ({note})")
        dest = store / name / config_name(meta) / meta.run_id
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        for file in SAVED_FILES:
            if (run_dir / file).is_file():
                shutil.copy2(run_dir / file, dest / file)
        saved.append(dest)
    if keep is not None:
        for config_dir in {d.parent for d in saved}:
            _prune(config_dir, keep)
    return [d for d in dict.fromkeys(saved) if d.exists()]


def _prune(config_dir: Path, keep: int) -> None:
    """Drop all but the newest `keep` runs of one config (by when they started)."""
    runs = [d for d in config_dir.iterdir() if (d / "meta.json").is_file()]
    started = {d: RunMeta.model_validate_json((d / "meta.json").read_text()).started_unix for d in runs}
    for old in sorted(runs, key=lambda d: started[d], reverse=True)[keep:]:
        shutil.rmtree(old)
