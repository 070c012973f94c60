"""The torch executor inside the engine: honest pool memory, typed failures, attention mass."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from reference_engine import ConfigError, EventKind, FinishReason, InvalidRequestError  # noqa: E402
from reference_engine.catalog import get_model  # noqa: E402
from reference_engine.executors.torch_executor import TorchExecutor  # noqa: E402
from reference_engine.executors.torch_model import DecoderShape  # noqa: E402
from reference_engine.memory import MemoryPlan  # noqa: E402
from tests.torch_helpers import BLOCK_TOKENS, TINY_FP32_BYTES_PER_TOKEN, make_core, torch_config  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.mark.parametrize("num_blocks", [1, 7, 48])
def test_a_pool_of_n_blocks_allocates_exactly_n_blocks_of_bytes(num_blocks):
    core = make_core(
        torch_config(num_blocks, engine__max_num_seqs=1, engine__max_num_batched_tokens=16, kv_cache__policy="none")
    )
    assert core.memory.num_blocks == num_blocks
    assert core.memory.bytes_per_token == TINY_FP32_BYTES_PER_TOKEN
    assert core.executor.pool_bytes == num_blocks * BLOCK_TOKENS * TINY_FP32_BYTES_PER_TOKEN
    assert core.executor.pool_bytes == core.memory.num_blocks * core.memory.bytes_per_block
    assert core.executor.allocated_pool_bytes == core.executor.pool_bytes  # CUDA: the allocator's own count


def test_bf16_kv_halves_the_bytes_the_plan_and_the_tensor_count():
    core = make_core(
        torch_config(
            8,
            model__kv_dtype="bf16",
            model__weight_dtype="bf16",
            engine__max_num_seqs=1,
            engine__max_num_batched_tokens=16,
            kv_cache__policy="none",
        )
    )
    assert core.memory.bytes_per_token == TINY_FP32_BYTES_PER_TOKEN // 2
    assert core.executor.pool_bytes == core.memory.num_blocks * core.memory.bytes_per_block


def test_catalog_parameter_counts_are_the_built_models():
    core = make_core(
        torch_config(8, engine__max_num_seqs=1, engine__max_num_batched_tokens=16, kv_cache__policy="none")
    )
    assert sum(p.numel() for p in core.executor.model.parameters()) == get_model("kvgate-tiny").num_params
    small = get_model("kvgate-small")
    assert DecoderShape.from_spec(small, 10_000.0, 1e-5).num_params == small.num_params


@pytest.mark.parametrize(
    "override, message",
    [
        ({"engine.kv_bytes_safety": 1.2}, "kv_bytes_safety"),
        ({"model.name": "qwen2.5-7b", "hardware.kv_pool_gib": 0.01}, "intermediate_size"),
        ({"model.kv_dtype": "fp8"}, "model.kv_dtype"),
    ],
)
def test_configs_it_cannot_run_honestly_are_refused_with_the_key_to_fix(override, message):
    config = torch_config(64, **{k.replace(".", "__"): v for k, v in override.items()})
    with pytest.raises(ConfigError, match=message):
        TorchExecutor(config, MemoryPlan.from_config(config))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_asking_for_cuda_without_it_is_a_config_error():
    config = torch_config(64, torch__device="cuda")
    with pytest.raises(ConfigError, match="no CUDA device"):
        TorchExecutor(config, MemoryPlan.from_config(config))


def test_device_out_of_memory_becomes_an_engine_oom_event(monkeypatch):
    core = make_core(torch_config(64))
    r = core.add_request(tenant="acme", prompt_token_ids=list(range(5, 45)), max_new_tokens=8)

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (simulated)")

    monkeypatch.setattr(core.executor.model, "hidden_states", out_of_memory)
    core.step()
    assert r.finish_reason is FinishReason.OOM and "out of memory" in r.finish_detail
    [oom] = [e for e in core.events if e.kind is EventKind.OOM]
    assert oom.reason == "device_oom" and oom.request_id is None
    assert core.pool.num_live == 0 and not core.has_work()


def test_attention_mass_comes_back_per_request_over_its_kv_tokens():
    core = make_core(torch_config(64, torch__record_attention=True))
    a = core.add_request(tenant="acme", prompt_token_ids=list(range(5, 25)), max_new_tokens=4)
    b = core.add_request(tenant="globex", prompt_token_ids=list(range(100, 110)), max_new_tokens=4)
    first = core.begin_step()  # both prompts in one step: 20 + 10 tokens
    assert {rid: len(m) for rid, m in first.outcome.attention.items()} == {a.request_id: 20, b.request_id: 10}
    assert sum(first.outcome.attention[a.request_id]) == pytest.approx(20, abs=1e-4)
    core.clock.advance_to(core.end_step().t_end_s)
    decode = core.begin_step()
    mass = decode.outcome.attention[a.request_id]
    assert len(mass) == 21 and sum(mass) == pytest.approx(1.0, abs=1e-5) and min(mass) >= 0


def test_a_request_without_token_ids_is_refused_with_what_to_do():
    core = make_core(torch_config(64))
    core.add_request(tenant="acme", num_prompt_tokens=40, max_new_tokens=4)
    with pytest.raises(InvalidRequestError, match="sim executor"):
        core.step()


def test_replay_steps_one_by_one_on_torch():
    """The torch executor runs one step per plan (max_steps_per_plan = 1): a plan never holds
    for more there, even when the caller could take more."""
    core = make_core(torch_config(64))
    r = core.add_request(tenant="acme", prompt_token_ids=list(range(5, 25)), max_new_tokens=6)
    while core.has_work():
        out = core.step(until_s=float("inf"))
        assert out.num_steps == 1
        core.clock.advance_to(out.t_end_s)
    assert r.num_output_tokens == 6
