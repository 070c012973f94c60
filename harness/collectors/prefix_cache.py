"""The target's prefix cache from outside: reset it, and probe that `cache_salt` isolates it.

    reset_prefix_cache(client, url)   POST /reset_prefix_cache (vLLM) or /flush_cache (SGLang)
    probe_cache_salt(...)             three requests: prime with salt A, repeat with A, then B

A reset before the run starts it cold (its prefix hits are its own); after the drain it is the
leak check: vLLM refuses a reset while any block is still held by a request (200 with
`{"success": false}`; SGLang answers 400), and after a successful one its KV usage must be 0.
vLLM serves /reset_prefix_cache only with `VLLM_SERVER_DEV_MODE=1`; a target without the route
is "not available", said so.

The salt probe sends one prompt several blocks long, unique to the run, three times in a row
with nothing else in flight: with salt A (a miss that stores it), with A again (must hit) and
with salt B (must miss: salts are how a tenant keeps its prefixes from another's timing probes).
A hit is read from the answer's `usage.prompt_tokens_details.cached_tokens` (vLLM with
`--enable-prompt-tokens-details`, SGLang, llama.cpp, kvgate), else from the change of the
target's prefix-hit counter across the request. When the repeat with the same salt shows no hit
the probe cannot tell isolation from no caching at all: it is "not measurable", never a pass.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from harness.collectors.prometheus import PrometheusScraper, ScrapeError, bearer
from harness.loadgen.exchange import CHAT_PATH

RESET_PATHS = ("/reset_prefix_cache", "/flush_cache")
PROBE_WORDS = 600  # several KV blocks at any block size in use (16 on GPUs, 128 on vLLM's CPU backend)
PROBE_VOCABULARY = (
    "the",
    "cache",
    "keeps",
    "every",
    "block",
    "of",
    "a",
    "prompt",
    "that",
    "was",
    "seen",
    "before",
    "and",
    "one",
    "more",
    "time",
    "it",
    "is",
    "read",
    "back",
)


@dataclass(frozen=True)
class ResetResult:
    available: bool
    ok: bool
    detail: str  # the route that answered and how, or why none did


def reset_prefix_cache(client: httpx.Client, base_url: str) -> ResetResult:
    """Try each known reset route; the first that exists decides (404/405: try the next)."""
    tried = []
    for path in RESET_PATHS:
        try:
            resp = client.post(base_url.rstrip("/") + path)
        except httpx.HTTPError as err:
            return ResetResult(False, False, f"POST {path}: {type(err).__name__}")
        if resp.status_code in (404, 405):
            tried.append(f"{path} {resp.status_code}")
            continue
        ok = resp.status_code == 200 and _success(resp)
        return ResetResult(True, ok, f"POST {path}: HTTP {resp.status_code}" + ("" if ok else f" {resp.text[:200]}"))
    return ResetResult(False, False, f"no reset route ({', '.join(tried)}; vLLM needs VLLM_SERVER_DEV_MODE=1)")


def _success(resp: httpx.Response) -> bool:
    """vLLM answers 200 with {"success": false} when blocks are still held; SGLang answers 400."""
    try:
        body = resp.json()
    except ValueError:
        return True
    return not isinstance(body, dict) or body.get("success", True) is not False


@dataclass(frozen=True)
class IsolationProbe:
    """Prime, repeat as the same party (must hit), repeat as another (must miss)."""

    measurable: bool
    same_hit_tokens: int | None
    other_hit_tokens: int | None
    source: str  # usage | metrics | "" (none)
    detail: str

    @property
    def isolated(self) -> bool | None:
        """True: the other party missed; False: it hit; None: not measurable."""
        return None if not self.measurable else self.other_hit_tokens == 0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "isolated": self.isolated}


HitCounter = Callable[[], tuple[float, float] | None]
"""The target's cumulative (prompt tokens looked up, of them hit in the cache) now; None: it
does not say. Engines publish counters a little after they answer, so a request's hits are read
once its lookups have been counted."""
COUNTER_WAIT_S = 2.0


def scraped_hit_counter(scraper: PrometheusScraper) -> HitCounter:
    """The prefix-cache counters of a target's /metrics (vLLM's, SGLang's, llama.cpp's names)."""

    def counter() -> tuple[float, float] | None:
        try:
            c = scraper.scrape().counters
        except ScrapeError:
            return None
        if "prefix_cache_hits_tokens" not in c:
            return None
        hits = c["prefix_cache_hits_tokens"]
        return c.get("prefix_cache_queries_tokens", hits + c.get("prompt_tokens_computed", 0.0)), hits

    return counter


Sender = tuple[httpx.Client, str | None]
"""Who sends a probe request: a client holding one tenant's key, and the cache_salt it sends."""


Offload = Callable[[], None]
"""Pushes what the probe's prime cached out of the GPU pool into a tier below it (the tier
probes, harness/collectors/tier_probe.py); raises `ProbeFailed` when it cannot."""


def probe_cache_salt(
    client: httpx.Client,
    base_url: str,
    model: str,
    hit_counter: HitCounter | None = None,
    offload: Offload | None = None,
) -> IsolationProbe:
    """One key, salts A, A, B: a salt must keep a tenant's prefixes from its other salts. With
    `offload`, the prefix is pushed out of the GPU before each repeat."""
    run = secrets.token_hex(4)
    a, b = (client, f"kvgate-a-{run}"), (client, f"kvgate-b-{run}")
    return _probe(base_url, model, hit_counter, run, (a, a, b), "salt", offload)


def probe_cross_tenant(
    client_a: httpx.Client,
    client_b: httpx.Client,
    base_url: str,
    model: str,
    hit_counter: HitCounter | None = None,
    offload: Offload | None = None,
) -> IsolationProbe:
    """Tenant A twice, then tenant B, no salt: one tenant must never hit another's prefix."""
    a, b = (client_a, None), (client_b, None)
    return _probe(base_url, model, hit_counter, secrets.token_hex(4), (a, a, b), "tenant", offload)


def _probe(
    base_url: str,
    model: str,
    hit_counter: HitCounter | None,
    run: str,
    senders: tuple[Sender, ...],
    party: str,
    offload: Offload | None = None,
) -> IsolationProbe:
    # Common words are one token each on any tokenizer; the run's id first makes every block new.
    prompt = f"probe {run}: " + " ".join(PROBE_VOCABULARY[i % len(PROBE_VOCABULARY)] for i in range(PROBE_WORDS))
    hits = []
    try:
        for i, (client, salt) in enumerate(senders):
            if i and offload is not None:  # a repeat finds the prefix below the GPU, or nowhere
                offload()
            hits.append(_hit(client, base_url, model, prompt, salt, hit_counter))
    except ProbeFailed as err:
        return IsolationProbe(False, None, None, "", str(err))
    (_, _), (same, source), (other, _) = hits
    if same is None or other is None:
        return IsolationProbe(False, None, None, "", "the target reports no cached tokens, in answers or metrics")
    if same <= 0:
        why = (
            "no tier below the GPU kept the prefix" if offload is not None else "prefix caching is off or not reported"
        )
        return IsolationProbe(
            False, same, other, source, f"the same {party} did not hit: {why}, isolation cannot be told"
        )
    detail = f"another {party} missed" if other == 0 else f"another {party} hit {other} cached tokens"
    return IsolationProbe(True, same, other, source, detail)


class ProbeFailed(Exception):
    """A probe request did not complete."""


def _hit(
    client: httpx.Client, base_url: str, model: str, prompt: str, salt: str | None, hit_counter: HitCounter | None
) -> tuple[int | None, str]:
    before = hit_counter() if hit_counter else None
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 1,
        "temperature": 0,
        "stream": False,
    }
    if salt is not None:
        body["cache_salt"] = salt
    try:
        resp = client.post(base_url.rstrip("/") + CHAT_PATH, json=body)
    except httpx.HTTPError as err:
        raise ProbeFailed(f"probe request: {type(err).__name__}") from err
    if resp.status_code != 200:
        raise ProbeFailed(f"probe request: HTTP {resp.status_code} {resp.text[:200]}")
    try:
        cached = (resp.json().get("usage") or {}).get("prompt_tokens_details", {}) or {}
    except (ValueError, AttributeError):
        cached = {}
    if isinstance(cached, dict) and isinstance(cached.get("cached_tokens"), int):
        return cached["cached_tokens"], "usage"
    after = _counted_after(hit_counter, before) if hit_counter and before else None
    if before is None or after is None:
        return None, ""
    return int(after[1] - before[1]), "metrics"


def _counted_after(hit_counter: HitCounter, before: tuple[float, float]) -> tuple[float, float] | None:
    """The counters once the request's lookups show in them (None: they never did)."""
    deadline = time.monotonic() + COUNTER_WAIT_S
    while True:
        now = hit_counter()
        if now is not None and now[0] > before[0]:
            return now
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


def prefix_client(api_key: str, timeout_s: float = 60.0) -> httpx.Client:
    """A client for the reset and the probe, with the target's key."""
    return httpx.Client(timeout=timeout_s, headers=bearer(api_key))
