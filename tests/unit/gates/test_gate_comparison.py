import itertools

import pytest

from gates import evaluate
from gates.comparison import goodput_shortfalls, measured_goodput
from tests.fixtures.records import RecordBuilder


@pytest.fixture
def judged(tmp_path):
    runs = itertools.count()

    def _judged(policy: str, num_refused: int):
        """A healthy run of `policy` that also refused `num_refused` chat requests under load."""
        builder = RecordBuilder(run_id=f"{policy}-run", policy=policy).healthy()
        for i in range(num_refused):
            builder.request(f"refused-{i}", sent_s=30 + i, ttft_s=None, e2e_s=0.01, status="error",
                            http_status=429, error_code="kv_capacity", finish_reason=None)
        return evaluate(builder.build(tmp_path / f"run-{next(runs)}"), only=["goodput"])

    return _judged


def test_a_candidate_below_the_best_baseline_falls_short(judged):
    candidates = [judged("lru", 0), judged("h2o", 10)]  # 100 %, 75 %
    baselines = [judged("none", 20), judged("vllm_like", 2)]  # 60 %, 93.75 %
    [short] = goodput_shortfalls(candidates, baselines)
    assert (short.policy, short.goodput, short.baseline_policy, short.baseline_goodput) == \
        ("h2o", 0.75, "vllm_like", 30 / 32)
    assert "below the baseline vllm_like" in short.explanation()


def test_equal_to_the_best_baseline_is_not_short(judged):
    assert goodput_shortfalls([judged("lru", 2)], [judged("vllm_like", 2)]) == []


def test_without_a_measured_baseline_nothing_falls_short(judged, tmp_path):
    unmeasured = evaluate(RecordBuilder().healthy().signals(client_requests=False).build(tmp_path / "nm"))
    assert measured_goodput(unmeasured) is None
    assert goodput_shortfalls([judged("h2o", 10)], [unmeasured]) == []
    assert goodput_shortfalls([judged("h2o", 10)], []) == []
