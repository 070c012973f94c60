"""How fast the target serves one request alone: prefill, first token and decode, measured.

    speed = measure_speed(base_url, key=key, model=model, tokens=settings.tokens)
    speed.request_s(prompt_tokens=700, output_tokens=48)     # one such request alone, in seconds

Two streamed chat completions, one after the other, with nothing else in flight: a short prompt
(`SHORT_PROMPT_TOKENS`) and a longer one (`LONG_PROMPT_TOKENS`, at most half the context the
server reports), each asking for `OUTPUT_TOKENS` of answer. They go through the same exchange
code as the load (harness/loadgen/exchange.py), so TTFT is taken at the first output delta.
From them, a line through the two TTFTs:

    ttft(p) = first_token_s + p × prefill_s_per_token       prefill_tokens_per_s = 1 / slope
    decode_s_per_token = (e2e − ttft) / (answer tokens − 1), over both answers

Then `PARALLEL_PROBES` short requests at once: `parallelism` = how many requests the target
serves at once as fast as one, `PARALLEL_PROBES` × the short probe's time over the burst's (1
for a server that takes them in turn; at most `PARALLEL_PROBES`: what it does with more is not
measured, so not assumed). A burst with a request that was not served leaves it 1.

A longer prompt that was not slower than the short one (a fast server, noise) leaves the slope
unknown; the long prompt's whole TTFT is then charged to its tokens (an upper bound on the cost
of a token). An answer of one token leaves decode unmeasured; a decode step is then charged as
the short prompt's TTFT (a bound: a step of decode is never slower than a whole short request).
Prompt token counts are the server's own (`usage`) where it reports them.

The context length is `max_model_len` of the model's `GET /v1/models` entry (vLLM reports it;
None where the server does not). A probe that times out is a `TargetTooSlowError` (exit 2: a
target that cannot serve one request alone in `timeout_s` cannot be load-tested); one that is
not served is a `SpeedNotMeasuredError`: the run goes on unsized, and its gates judge a target
that serves nothing (a harness error would hide that verdict). The burst ends by
`2 × PARALLEL_PROBES ×` the short probe's time (+ `BURST_SLACK_S`), served or not: a target
that hangs under load costs seconds here, not the request timeout.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any

import httpx

from harness.loadgen.exchange import Call, run_exchange
from harness.loadgen.httpx_transport import HttpxTransport
from harness.loadgen.outcome import RequestOutcome, Status
from harness.loadgen.prompts import TokenModel, chat_prompt
from harness.loadgen.tenants import Tenant
from harness.preflight import MODELS_PATH
from record.errors import KvgateError

SHORT_PROMPT_TOKENS = 64
LONG_PROMPT_TOKENS = 1024
OUTPUT_TOKENS = 16
PARALLEL_PROBES = 8
BURST_SLACK_S = 5.0
TIMEOUT_S = 120.0
ASK_FOR_LENGTH = "Continue this list of words for as long as you can:"
"""The probes' instruction: an answer that runs to max_tokens times decode best."""
METHOD = (
    f"two streamed chat completions alone on the target, prompts of about {SHORT_PROMPT_TOKENS} and "
    f"{LONG_PROMPT_TOKENS} tokens (at most half its context), {OUTPUT_TOKENS} answer tokens each: prefill "
    f"from the TTFTs' difference, decode from the time after the first token; then {PARALLEL_PROBES} short "
    f"ones at once: parallelism = {PARALLEL_PROBES} × one's time / the burst's"
)


class SpeedNotMeasuredError(KvgateError):
    """A timing probe was not served (an error, an empty or broken answer): the target's speed is
    unknown, and the run's gates, not the harness, judge a target that serves nothing."""


class TargetTooSlowError(KvgateError):
    """The target is too slow for any run: a probe alone timed out, or (harness/load_sizing.py)
    even the smallest run cannot finish its requests. A harness error, not a verdict."""


@dataclass(frozen=True, kw_only=True)
class TargetSpeed:
    """One request alone on the target, modelled: a fixed cost to the first token, a cost per
    prompt token, a cost per answer token. Figures in seconds; the record keeps them all."""

    first_token_s: float
    """The fixed part of TTFT: queueing, scheduling, the HTTP round trip."""
    prefill_s_per_token: float
    decode_s_per_token: float
    max_model_len: int | None
    parallelism: float = 1.0
    """Requests the target serves at once as fast as one (1 ..PARALLEL_PROBES)."""
    probes: tuple[dict[str, Any], ...] = ()
    """What each probe sent and measured: prompt and answer tokens, TTFT, end to end."""
    notes: tuple[str, ...] = ()

    @property
    def prefill_tokens_per_s(self) -> float:
        return 1 / self.prefill_s_per_token

    @property
    def decode_tokens_per_s(self) -> float:
        return 1 / self.decode_s_per_token

    def request_s(self, prompt_tokens: float, output_tokens: float) -> float:
        """Seconds one request of these sizes takes alone on the target."""
        return self.first_token_s + prompt_tokens * self.prefill_s_per_token + output_tokens * self.decode_s_per_token

    def prefilled_in(self, seconds: float) -> float:
        """Prompt tokens the target prefills in `seconds` (after its fixed cost)."""
        return seconds / self.prefill_s_per_token

    def to_dict(self) -> dict[str, Any]:
        """meta.live.target_speed."""
        return {
            **{k: v for k, v in asdict(self).items() if k not in ("probes", "notes")},
            "prefill_tokens_per_s": round(self.prefill_tokens_per_s, 1),
            "decode_tokens_per_s": round(self.decode_tokens_per_s, 2),
            "method": METHOD,
            "probes": list(self.probes),
            "notes": list(self.notes),
        }


def fit_speed(short: RequestOutcome, long: RequestOutcome, max_model_len: int | None) -> TargetSpeed:
    """The model of the module docstring from the two probes' outcomes."""
    for probe in (short, long):
        if probe.status == Status.TIMEOUT.value:
            raise TargetTooSlowError(
                f"the target did not answer a {probe.prompt_tokens}-token prompt alone within "
                f"{probe.e2e_s or 0:.0f} s: too slow to load-test"
            )
        if probe.status != Status.OK.value or probe.ttft_s is None or probe.e2e_s is None:
            http = f" (HTTP {probe.http_status})" if probe.http_status not in (None, 200) else ""
            raise SpeedNotMeasuredError(
                f"the timing probe of {probe.prompt_tokens} prompt tokens was not served: "
                f"{probe.status} {probe.error_code}{http}"
            )
    ttft_short, ttft_long = short.ttft_s or 0.0, long.ttft_s or 0.0
    p_short, p_long = float(short.prompt_tokens or 0), float(long.prompt_tokens or 0)
    notes = []
    if ttft_long > ttft_short and p_long > p_short:
        prefill = (ttft_long - ttft_short) / (p_long - p_short)
    else:
        prefill = ttft_long / max(p_long, 1.0)
        notes.append("the longer prompt was not slower: prefill charged as its whole TTFT (an upper bound)")
    first_token_s = max(0.0, ttft_short - p_short * prefill)
    steps = [((o.e2e_s or 0.0) - (o.ttft_s or 0.0), (o.completion_tokens or 0) - 1) for o in (short, long)]
    num_steps = sum(n for _, n in steps if n > 0)
    if num_steps:
        decode = max(sum(t for t, n in steps if n > 0) / num_steps, 1e-6)
    else:
        decode = ttft_short
        notes.append("answers of one token: decode charged as a short prompt's TTFT (an upper bound)")
    probes = tuple(
        {
            "prompt_tokens": o.prompt_tokens,
            "completion_tokens": o.completion_tokens,
            "ttft_s": round(o.ttft_s or 0.0, 4),
            "e2e_s": round(o.e2e_s or 0.0, 4),
        }
        for o in (short, long)
    )
    return TargetSpeed(
        first_token_s=first_token_s,
        prefill_s_per_token=max(prefill, 1e-7),
        decode_s_per_token=decode,
        max_model_len=max_model_len,
        probes=probes,
        notes=tuple(notes),
    )


def context_length(client: httpx.Client, base_url: str, key: str, model: str) -> int | None:
    """`max_model_len` of `model`'s GET /v1/models entry (vLLM's), or None."""
    try:
        resp = client.get(base_url + MODELS_PATH, headers={"Authorization": f"Bearer {key}"})
        entries = resp.json()["data"] if resp.status_code == 200 else []
        found = [e.get("max_model_len") for e in entries if e.get("id") == model]
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return int(found[0]) if found and isinstance(found[0], int) and found[0] > 0 else None


def fit_parallelism(single_s: float, burst_s: float, burst: Sequence[RequestOutcome]) -> float:
    """How many of `burst` (sent at once, over in `burst_s`) the target served as fast as one
    alone (`single_s`): 1 ..len(burst), and 1 if any was not served."""
    if not burst or any(o.status != Status.OK.value for o in burst) or burst_s <= 0:
        return 1.0
    return min(float(len(burst)), max(1.0, len(burst) * single_s / burst_s))


def measure_speed(
    base_url: str,
    *,
    key: str,
    model: str,
    tokens: TokenModel,
    timeout_s: float = TIMEOUT_S,
    clock: Callable[[], float] = time.perf_counter,
    transport: httpx.BaseTransport | None = None,
) -> TargetSpeed:
    """Time the probes on the target (module docstring). `clock` and `transport`: test seams."""
    base = base_url.rstrip("/")
    tenant = Tenant(name="speed", key=key, traffic_class="interactive")
    fresh = secrets.token_hex(4)  # prompts no earlier run cached: a prefix hit would hide the prefill

    def probe(client: httpx.Client, name: str, num_tokens: int) -> RequestOutcome:
        call = Call(
            request_id=f"speed-{name}-{fresh}",
            scenario="speed",
            phase="preflight",
            tenant=tenant,
            model=model,
            prompt=chat_prompt(num_tokens, seed=f"speed-{name}-{fresh}", prefix=ASK_FOR_LENGTH, tokens=tokens),
            max_tokens=OUTPUT_TOKENS,
        )
        exchange = HttpxTransport(client, base)
        return run_exchange(exchange, call, timeout_s=timeout_s, on_done=lambda o: None, clock=clock).outcome

    with httpx.Client(timeout=timeout_s, transport=transport) as client:
        max_model_len = context_length(client, base, key, model)
        long_tokens = min(LONG_PROMPT_TOKENS, max_model_len // 2) if max_model_len else LONG_PROMPT_TOKENS
        short = probe(client, "short", SHORT_PROMPT_TOKENS)
        long = probe(client, "long", max(long_tokens, 2 * SHORT_PROMPT_TOKENS))
    speed = fit_speed(short, long, max_model_len)
    # the burst ends, served or not, by when the target would have served it in turn, twice over
    burst_timeout_s = min(timeout_s, 2 * PARALLEL_PROBES * (short.e2e_s or 0.0) + BURST_SLACK_S)
    began = clock()
    with (
        httpx.Client(timeout=burst_timeout_s, transport=transport) as client,
        ThreadPoolExecutor(PARALLEL_PROBES) as pool,
    ):
        burst = list(pool.map(lambda k: probe(client, f"burst-{k}", SHORT_PROMPT_TOKENS), range(PARALLEL_PROBES)))
    burst_s = clock() - began
    return replace(speed, parallelism=round(fit_parallelism(short.e2e_s or 0.0, burst_s, burst), 2))
