import pytest

from reference_engine import EngineConfig, with_overrides
from reference_engine.config import TrafficClass
from reference_engine.executors.base import ScheduledChunk, StepPlan
from reference_engine.executors.sim import SimExecutor, fake_token, fake_tokens
from reference_engine.memory import MemoryPlan
from reference_engine.request import Request


def sim(model="llama-3-8b", gpu="h200"):
    cfg = with_overrides(EngineConfig(), {"model.name": model, "hardware.gpu": gpu})
    return SimExecutor(cfg, MemoryPlan.from_config(cfg))


def decode_plan(num_seqs: int, context: int) -> StepPlan:
    chunks = []
    for i in range(num_seqs):
        r = Request(
            request_id=f"r{i}",
            tenant="t",
            traffic_class=TrafficClass.INTERACTIVE,
            num_prompt_tokens=context,
            max_new_tokens=10,
            arrival_s=0,
            output_token_ids=[7],
        )
        r.num_computed_tokens = context
        chunks.append(ScheduledChunk(r, 1))
    return StepPlan(chunks)


def test_small_batch_decode_matches_the_published_h200_anchor():
    # Llama-3-8B on an H200 under vLLM: ≈ 6.5 ms per decode step at small batch
    step = sim().execute(decode_plan(1, 512)).duration_s
    assert step == pytest.approx(6.5e-3, rel=0.05)


def test_decode_is_memory_bound_and_grows_with_kv_read():
    s = sim()
    short = s.execute(decode_plan(32, 512)).duration_s
    long = s.execute(decode_plan(32, 8192)).duration_s
    assert long > short * 1.5


def test_prefill_is_compute_bound_and_superlinear_in_length():
    s = sim(gpu="h100-sxm")
    t8k, t32k = s.prefill_time_s(8192), s.prefill_time_s(32768)
    assert t32k > 4 * t8k  # attention is quadratic
    # modelled time, no clock: above the dense matmuls at the data sheet's peak (2 FLOPs per
    # parameter and token, 989 TFLOP/s), within a few times them (MFU below 1, attention on top)
    dense_at_peak = 2 * 8.03e9 * 32768 / 989e12
    assert dense_at_peak < t32k < 4 * dense_at_peak


def test_fake_tokens_are_deterministic_and_in_the_generatable_vocabulary():
    assert fake_token(42, 7) == fake_token(42, 7)
    assert all(5 <= fake_token(s, p) < 4096 for s in range(20) for p in range(50))


def test_a_plan_run_several_times_is_priced_as_its_steps_one_by_one():
    """The same floats: each step priced from the integer sums of that step."""
    s = sim()
    plan = decode_plan(4, 1000)
    plan.num_steps = 3
    single = [s.execute(decode_plan(4, 1000 + k)).duration_s for k in range(3)]
    assert s.execute(plan).durations_s == single


def test_a_plan_stops_before_a_step_that_would_start_at_its_stop_time():
    s = sim()
    one = s.execute(decode_plan(2, 100)).duration_s
    plan = decode_plan(2, 100)
    plan.num_steps, plan.start_s, plan.stop_s = 50, 10.0, 10.0 + 2.5 * one
    outcome = s.execute(plan)
    assert outcome.num_steps == 3  # starts at 10, 10 + d, 10 + 2d (< stop); the fourth would start after it
    assert all(len(tokens) == 3 for tokens in outcome.sampled)
    assert outcome.boundaries_s(10.0)[-2] < plan.stop_s <= outcome.boundaries_s(10.0)[-1]


def test_a_plan_run_several_times_samples_exactly_the_tokens_of_single_steps():
    s = sim()
    plan = decode_plan(2, 1000)
    plan.num_steps = 40
    outcome = s.execute(plan)
    for chunk, tokens in zip(plan.chunks, outcome.sampled):
        seed = s._seed(chunk.request.request_id)
        assert tokens == [fake_token(seed, p) for p in range(1001, 1041)]


def test_fake_tokens_wrap_around_the_table_as_fake_token_does():
    seed = 123_456
    wrap = (1 << 16) - seed % (1 << 16) - 3  # the window crosses the token table's end
    for start, num in ((0, 5), (1000, 40), (2**40, 300), (wrap, 10), (wrap, 3 * (1 << 16))):
        assert fake_tokens(seed, start, num) == [fake_token(seed, p) for p in range(start, start + num)]
