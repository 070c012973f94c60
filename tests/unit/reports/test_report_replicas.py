"""Replicas side by side in the run report, and the red line of a cache that was never exercised."""

from __future__ import annotations

from pathlib import Path

from gates import evaluate
from record.run_record import PrefixReuse
from reports import render_run_report
from reports.page import esc
from reports.prefix_reuse import cache_warning, reuse_line
from reports.sections.replicas import ReplicasSection
from tests.fixtures.records import RecordBuilder


def test_each_replica_and_the_fleet_get_a_column_with_their_figures_and_verdicts(tmp_path: Path) -> None:
    builder = RecordBuilder().fleet().event("engine_restart", 40.0, reason="health", replica="b")
    record = builder.replica_sample("b", 41.0, missing=True).build(tmp_path)
    verdict = evaluate(record)
    html = ReplicasSection().render(record, verdict)
    assert "<th>a</th><th>b</th><th>fleet</th>" in html
    assert 'restarts seen</td><td class="num">0</td><td class="num">1</td><td class="num">1</td>' in html
    assert 'prefix hit ratio of the load</td><td class="num">20.0%</td>' in html
    assert '<code>no_oom</code></td><td class="num"><span class="badge pass">' in html  # a passed, b failed
    assert "fig-replica-usage" in html and "b restart" in html
    assert "prefix hits: 20.0% of prompt tokens (fleet)" in html


def test_a_single_target_says_it_has_no_replicas(healthy_run) -> None:
    record, verdict = healthy_run
    assert "no replicas behind it" in ReplicasSection().render(record, verdict)


def test_the_trace_bound_stands_beside_the_measured_ratio(tmp_path: Path) -> None:
    reuse = PrefixReuse(bound=0.373, block_tokens=16, longest_shared_tokens=19456, num_requests=200, source="t")
    record = RecordBuilder().fleet().meta(prefix_reuse=reuse).build(tmp_path)
    assert reuse_line(record) == (
        "prefix hits: 20.0% of prompt tokens (fleet); an infinite cache with 16-token blocks would hit 37.3% of "
        "this trace (its longest shared prefix: 19456 tokens)"
    )
    assert cache_warning(record) is None


def test_prefixes_shorter_than_a_block_or_no_hit_at_all_say_the_cache_was_not_exercised(tmp_path: Path) -> None:
    short = PrefixReuse(bound=0.0, block_tokens=128, longest_shared_tokens=96, num_requests=20, source="t")
    record = RecordBuilder().fleet().meta(prefix_reuse=short).build(tmp_path / "short")
    warning = cache_warning(record)
    assert warning is not None and warning.startswith("CACHE NOT EXERCISED: the trace's shared prefixes are shorter")
    html = render_run_report(record, evaluate(record)).read_text()
    assert f'<div class="alert">{esc(warning)}</div>' in html
    never = RecordBuilder().fleet().final(prefix_cache_hits_tokens=0.0).build(tmp_path / "never")
    assert (cache_warning(never) or "").startswith("CACHE NOT EXERCISED: not one prompt token hit")
    unknown = RecordBuilder().fleet()
    unknown._meta["final"] = {k: v for k, v in unknown._meta["final"].items() if not k.startswith("prefix_cache")}
    assert cache_warning(unknown.build(tmp_path / "unknown")) is None  # no counters: nothing to say
