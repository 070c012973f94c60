import itertools

import pytest

from gates import evaluate
from gates.comparison import goodput_shortfalls, measured_goodput
from tests.fixtures.records import RecordBuilder


@pytest.fixture
def judged(tmp_path):
    runs = itertools.count()

    def _judged(policy: str, num_refused: int):
        """A healthy run of `policy` (30 chat requests under load, all in time) that also refused
        `num_refused` chat requests under load."""
        builder = RecordBuilder(run_id=f"{policy}-run", policy=policy).healthy()
        for i in range(num_refused):
            builder.request(
                f"refused-{i}",
                sent_s=30 + i * 0.1,
                ttft_s=None,
                e2e_s=0.01,
                status="error",
                http_status=429,
                error_code="kv_capacity",
                finish_reason=None,
            )
        return evaluate(builder.build(tmp_path / f"run-{next(runs)}"), only=["goodput"])

    return _judged


def test_a_candidate_below_the_best_baseline_beyond_the_noise_falls_short(judged):
    candidates = [judged("lru", 0), judged("h2o", 90)]  # 100 %, 25 % of 120
    baselines = [judged("none", 270), judged("vllm_like", 10)]  # 10 %, 75 % of 40
    [short] = goodput_shortfalls(candidates, baselines)
    assert (short.candidate.policy, short.candidate.fraction, short.candidate.num_offered) == ("h2o", 0.25, 120)
    assert (short.baseline.policy, short.baseline.fraction, short.baseline.num_offered) == ("vllm_like", 0.75, 40)
    # 2 standard errors: 2 × sqrt(0.25 × 0.75 / 120 + 0.75 × 0.25 / 40) ≈ 15.8 points, far below 50
    assert short.noise == pytest.approx(0.158, abs=0.001)
    assert "below the baseline vllm_like" in short.explanation()


def test_a_difference_within_the_noise_is_not_short(judged):
    # 30 of 40 (75 %) against 30 of 36 (83 %): 8 points apart, the noise is ±18
    assert goodput_shortfalls([judged("lru", 10)], [judged("vllm_like", 6)]) == []


def test_without_a_measured_baseline_nothing_falls_short(judged, tmp_path):
    unmeasured = evaluate(RecordBuilder().healthy().signals(client_requests=False).build(tmp_path / "nm"))
    assert measured_goodput(unmeasured) is None
    assert goodput_shortfalls([judged("h2o", 90)], [unmeasured]) == []
    assert goodput_shortfalls([judged("h2o", 90)], []) == []
