"""What a comparison compares: configs, each run one or more times, some of them baselines.

    configs = group_runs(records, verdicts, baselines=[run_dir])   # stored runs, grouped by config digest
    ComparedConfig("multi_queue", runs=(ComparedRun.of(record, verdict, report), ...))   # a matrix

A config's runs are repeats of the same load (`kvgate matrix --repeat N`); the comparison shows
their median and range. A baseline runs and is compared like a candidate but never decides:
not the overall choice, not a "best", not the exit code.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from gates import Outcome, Verdict
from record.run_record import RunMeta, RunRecord
from reports.run_report import REPORT_FILE
from reports.summary import RunSummary, summarize


@dataclass(frozen=True, eq=False)  # identity: a record's tables do not compare
class ComparedRun:
    record: RunRecord
    verdict: Verdict
    summary: RunSummary
    report: Path | None  # the run's own page, linked from the comparison; None: not written

    @classmethod
    def of(cls, record: RunRecord, verdict: Verdict, report: Path | None = None) -> ComparedRun:
        """`report` defaults to the record's report.html when there is one."""
        default = record.dir / REPORT_FILE
        return cls(record, verdict, summarize(record), report or (default if default.exists() else None))


@dataclass(frozen=True, eq=False)  # identity: a record's tables do not compare
class ComparedConfig:
    name: str
    runs: tuple[ComparedRun, ...]
    baseline: bool = False

    def __post_init__(self) -> None:
        assert self.runs, "a compared config has at least one run"

    @property
    def label(self) -> str:
        return f"{self.name} (baseline)" if self.baseline else self.name

    def num_runs(self, outcome: Outcome) -> int:
        return sum(run.verdict.outcome is outcome for run in self.runs)

    @property
    def passed_every_gate(self) -> bool:
        """Every run's verdict is PASS (a run where no gate could be measured is not)."""
        return self.num_runs(Outcome.PASS) == len(self.runs)


def group_runs(
    records: Sequence[RunRecord], verdicts: Sequence[Verdict], baselines: Collection[Path] = ()
) -> list[ComparedConfig]:
    """Stored runs as configs: runs with the same config digest (and policy) are repeats of one config. A
    config is named by its policy, or by its config file where two share a policy, or by run id;
    it is a baseline when one of its runs' directories is in `baselines`."""
    assert len(records) == len(verdicts), "one verdict per record"
    groups: dict[tuple[str, str], list[ComparedRun]] = {}
    for record, verdict in zip(records, verdicts):
        key = (record.meta.config_digest or record.meta.run_id, record.meta.policy)
        groups.setdefault(key, []).append(ComparedRun.of(record, verdict))
    marked = {Path(b).resolve() for b in baselines}
    names = _names([runs[0].record.meta for runs in groups.values()])
    return [
        ComparedConfig(name, tuple(runs), baseline=any(r.record.dir.resolve() in marked for r in runs))
        for name, runs in zip(names, groups.values())
    ]


def _names(metas: Sequence[RunMeta]) -> list[str]:
    """The first naming that tells every config apart: policy, config file, run id."""
    for name_of in (lambda m: m.policy, lambda m: Path(m.config_path).stem, lambda m: m.run_id):
        names = [name_of(m) or m.run_id for m in metas]
        if len(set(names)) == len(names):
            return names
    return [f"{m.run_id}-{i}" for i, m in enumerate(metas, 1)]
