import itertools

import pytest

from gates import evaluate
from gates.comparison import Goodput, beyond_noise, goodput_shortfalls, measured_goodput
from gates.noise import NOISE_Z
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
    # NOISE_Z (1.96) standard errors, each share taken as (served + 1) / (offered + 2):
    # 1.96 × sqrt(31/122 × 91/122 / 122 + 31/42 × 11/42 / 42) ≈ 15.4 points, far below 50
    assert short.noise == pytest.approx(0.154, abs=0.001)
    assert "below the baseline vllm_like" in short.explanation()


def test_a_difference_within_the_noise_is_not_short(judged):
    # 30 of 40 (75 %) against 30 of 36 (83 %): 8 points apart, the noise is ±18
    assert goodput_shortfalls([judged("lru", 10)], [judged("vllm_like", 6)]) == []


def test_without_a_measured_baseline_nothing_falls_short(judged, tmp_path):
    unmeasured = evaluate(RecordBuilder().healthy().signals(client_requests=False).build(tmp_path / "nm"))
    assert measured_goodput(unmeasured) is None
    assert goodput_shortfalls([judged("h2o", 90)], [unmeasured]) == []
    assert goodput_shortfalls([judged("h2o", 90)], []) == []


def test_a_baseline_that_served_all_of_a_few_requests_is_not_certain():
    # 5 of 8 (62.5 %) against all of 5: by the plain formula the baseline has no variance and
    # 37.5 points would be "beyond the noise" (±33); adjusted, the noise is ±40
    candidate, baseline = Goodput("c", "lru", 5 / 8, 8), Goodput("b", "none", 1.0, 5)
    noise = NOISE_Z * (candidate.estimate().sampling_var + baseline.estimate().sampling_var) ** 0.5
    assert noise == pytest.approx(0.399, abs=0.001) and 1.0 - 5 / 8 < noise
    assert beyond_noise(candidate, baseline) is None  # the one rule, gates/noise.py, says the same
