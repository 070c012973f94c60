"""The release gate against a real `vllm serve` on CPU: a build whose pool shrank is flagged.

Three runs of the same chat load against vLLM with 160 blocks are saved as the baseline store
(`kvgate baseline save`); one run against vLLM with 48 blocks (`--num-gpu-blocks-override`, the
same model, context and load) is gated against them (`kvgate gate --against`). The load is eight
users asking for answers that grow each request past its first block: 160 blocks hold them all,
48 do not, and vLLM queues what does not fit (it preempted none here: its counter would be judged
too). The release gate names the regressions that clear the noise of three runs (measured: P95
TTFT of chat 8.1-8.3 s against 1.2-1.4 s, peak KV usage 89 % against 30 %), the pool's size stands
in its notes, and a fourth run of the good build against the same store shows none. Only the
regression verdict is asserted: the gates' own verdict (interactive TTFT on two CPU cores) fails
either way, which is `kvgate gate`'s exit 1 too.

    pytest -m real_engine tests/real_engines/test_vllm_regression.py -s     # ~10 min on two cores
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.real_engines.conftest import ENV_DIR, MODEL_DIR
from tests.real_engines.kvgate_cli import against, kvgate
from tests.real_engines.vllm_server import REAL_ENGINE_TIMEOUT_S, VllmServer, missing

pytestmark = [pytest.mark.real_engine, pytest.mark.slow, pytest.mark.timeout(2 * REAL_ENGINE_TIMEOUT_S)]

CONTEXT = 896  # what 48 blocks hold for gemma-3's two KV cache groups: vLLM starts only if it fits
GOOD_BLOCKS, SMALL_BLOCKS = 160, 48
LOAD = ("--profile", "quick", "--scenarios", "long_output", "--users", "8", "--spawn-rate", "8")
DURATION_S = "40"
ANSWERS = {"KVGATE_LONG_OUTPUT_PROMPT_TOKENS": "64", "KVGATE_LONG_OUTPUT_TOKENS": "64"}


def _runs(tmp_path: Path, name: str, num_blocks: int, count: int) -> list[Path]:
    """`count` runs of the load against one vLLM with `num_blocks` blocks."""
    dirs = [tmp_path / f"{name}-{k}" for k in range(count)]
    log = tmp_path / f"{name}.log"
    with VllmServer(ENV_DIR, MODEL_DIR, log, num_blocks=num_blocks, max_model_len=CONTEXT) as server:
        for run_dir in dirs:
            args = ("run", *against(server.url), *LOAD, "--duration", DURATION_S, "--out", str(run_dir))
            result = kvgate(*args, settings=ANSWERS)
            assert result.returncode in (0, 1), f"kvgate run exited {result.returncode}:\n{result.stderr}"
    return dirs


def _gate(run_dir: Path, store: Path) -> dict:
    """The release gate's verdict (regression.json); exit 1 also stands for failed gates."""
    result = kvgate("gate", str(run_dir), "--against", str(store))
    assert result.returncode in (0, 1), f"kvgate gate exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return json.loads((run_dir / "regression.json").read_text())


def test_a_smaller_vllm_pool_is_flagged_against_three_good_runs(tmp_path: Path, values: dict) -> None:
    if why := missing(ENV_DIR, MODEL_DIR):
        pytest.skip(why)
    good = _runs(tmp_path, "good", GOOD_BLOCKS, 4)
    store = tmp_path / "baselines"
    saved = kvgate("baseline", "save", *map(str, good[:3]), "--name", "main", "--store", str(store))
    assert saved.returncode == 0, saved.stderr
    (small,) = _runs(tmp_path, "small", SMALL_BLOCKS, 1)

    small_verdict, good_verdict = _gate(small, store / "main"), _gate(good[3], store / "main")
    values["regression"] = {
        "small_pool": {k: small_verdict[k] for k in ("regressions", "notes", "summary")},
        "good_again": {k: good_verdict[k] for k in ("regressions", "summary")},
        "metrics": {m["metric"]: (m["candidate"], m["baselines"], m["status"]) for m in small_verdict["metrics"]},
    }
    assert small_verdict["comparable"] and len(small_verdict["baselines"]) == 3
    assert {"ttft_p95.interactive", "peak_usage", "preemptions"} & set(small_verdict["regressions"]), small_verdict
    assert small_verdict["notes"] == [f"pool size (blocks) {SMALL_BLOCKS} here, {GOOD_BLOCKS} in the baselines"]
    assert good_verdict["regressions"] == [], good_verdict["summary"]
