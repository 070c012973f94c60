"""A real P/D pair: two `vllm serve` (CPU) with vLLM's ExampleConnector (the KV of each prompt
through a shared directory, as safetensors per layer), a producer and a consumer, behind a P/D
proxy (pd_proxy.py: the prefill request with max_tokens = 1, then the client's request to the
decode instance), gated by kvgate as a fleet of two replicas under the client-side P/D chaos
(pd_scenarios/pd_chaos.py: hang-ups just after the first word, the hand-off as a client sees it).

The decode instance must really load the prompt's KV through the connector (its
`vllm:external_prefix_cache_hits` grow): a pair that recomputed everything would be no P/D pair.
Two vLLMs on two cores are slow, so the load is two users for half a minute.

    pytest -m real_engine tests/real_engines/test_vllm_pd.py -s     # two vLLM starts, one run
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from gates import read_verdict
from harness.target import free_port, stop_server
from record.run_record import RunRecord
from tests.e2e.run_support import REPO
from tests.real_engines.conftest import ENV_DIR, MODEL_DIR
from tests.real_engines.kvgate_cli import against, kvgate
from tests.real_engines.vllm_server import API_KEY, REAL_ENGINE_TIMEOUT_S, VllmServer, missing
from tests.waiting import wait_for

pytestmark = [pytest.mark.real_engine, pytest.mark.slow, pytest.mark.timeout(REAL_ENGINE_TIMEOUT_S)]

ROLES = {"prefill": "kv_producer", "decode": "kv_consumer"}
# pd_chaos's prompts within the 2,560-token context and several of vLLM's 128-token CPU blocks
# (worth a transfer), its long answers short enough to end on two cores within the run
PD_LOAD = {
    "KVGATE_CANCEL_PROMPT_TOKENS": "700",
    "KVGATE_LONG_OUTPUT_PROMPT_TOKENS": "700",
    "KVGATE_LONG_OUTPUT_TOKENS": "48",
}
EXTERNAL_HITS = "vllm:external_prefix_cache_hits_total"


def connector(role: str, storage: Path) -> tuple[str, str]:
    extra = {"shared_storage_path": str(storage)}
    config = {"kv_connector": "ExampleConnector", "kv_role": role, "kv_connector_extra_config": extra}
    return ("--kv-transfer-config", json.dumps(config))


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, VllmServer], str]]:
    """The two instances (started together: each takes minutes to load) and the proxy's URL."""
    if why := missing(ENV_DIR, MODEL_DIR):
        pytest.skip(why)
    work = tmp_path_factory.mktemp("vllm-pd")
    storage = work / "kv"
    storage.mkdir()
    servers = {
        name: VllmServer(ENV_DIR, MODEL_DIR, work / f"vllm-{name}.log", extra_args=connector(role, storage))
        for name, role in ROLES.items()
    }
    with ExitStack() as stack:
        for server in servers.values():
            stack.callback(server.stop)
        with ThreadPoolExecutor(len(servers)) as pool:
            list(pool.map(VllmServer.__enter__, servers.values()))
        port = free_port()
        cmd = ["-m", "tests.real_engines.pd_proxy", "--prefill", servers["prefill"].url]
        cmd += ["--decode", servers["decode"].url, "--port", str(port)]
        proxy = subprocess.Popen([sys.executable, *cmd], cwd=REPO, start_new_session=True)
        stack.callback(stop_server, proxy)
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: _answers(f"{url}/health"), "the proxy answers", alive=lambda: proxy.poll() is None)
        yield servers, url


def test_a_vllm_pd_pair_loads_its_kv_through_the_connector_and_is_judged_per_instance(
    pair: tuple[dict[str, VllmServer], str], tmp_path: Path, values: dict
) -> None:
    servers, url = pair
    before = _external_hits(servers["decode"].url)
    run_dir = tmp_path / "run"
    replicas = [a for name, s in servers.items() for a in ("--replica", f"{s.url},name={name}")]
    run = kvgate(
        "run",
        *against(url),
        *replicas,
        *("--scenarios-dir", str(REPO / "pd_scenarios"), "--scenarios", "pd_chaos"),
        *("--profile", "quick", "--users", "2", "--spawn-rate", "2", "--duration", "30", "--out", str(run_dir)),
        settings=PD_LOAD,
    )
    print(run.stdout[-6000:])
    assert run.returncode in (0, 1), f"kvgate run exited {run.returncode}:\n{run.stdout}\n{run.stderr}"
    record, verdict = RunRecord.load(run_dir), read_verdict(run_dir)
    assert verdict is not None
    loaded = _external_hits(servers["decode"].url) - before
    statuses = record.requests[record.requests["phase"] == "load"]["status"].value_counts().to_dict()
    values["pd"] = {
        "decode_external_hit_tokens": loaded,
        "statuses": statuses,
        "gates": {r.gate: {"outcome": r.outcome.value, "explanation": r.explanation} for r in verdict.results},
    }
    assert loaded > 0  # the decode instance took the prompts' KV from the connector
    assert statuses.get("ok", 0) > 0 and statuses.get("cancelled", 0) > 0  # answers, and hang-ups at the hand-off
    assert list(record.replicas["replica"]) == list(ROLES)
    for gate in ("capacity_after_drain", "memory_recovery"):
        assert set(verdict.result(gate).evidence["replicas"]) == set(ROLES), gate
    assert not [p.name for p in run_dir.rglob("*") if p.is_file() and API_KEY in p.read_text(errors="ignore")]


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5.0).status_code == 200
    except httpx.HTTPError:
        return False


def _external_hits(url: str) -> float:
    text = httpx.get(f"{url}/metrics", headers={"authorization": f"Bearer {API_KEY}"}, timeout=30.0).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(EXTERNAL_HITS))
