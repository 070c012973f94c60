"""The service-level objective several gates share: one copy of it, the `[slo]` table of
thresholds.toml.

    ttft_ms                     a critical interactive request gets its first token within this
    critical_max_prompt_tokens  interactive requests with longer prompts are not critical chat
                                traffic: a 32K-token prompt needs over a second of prefill alone

`interactive_ttft` holds the P95 TTFT of critical requests to `ttft_ms`, `goodput` counts the
offered critical requests answered within it; `rejections` and `approximate_answers` judge
critical requests apart from the rest (`GROUPS`). A gate reads the two as `slo.ttft_ms` and
`slo.critical_max_prompt_tokens` from its limits (`Thresholds.for_gate` adds the table to every
gate's own), so a file that sets `[slo] ttft_ms` moves every gate that uses it, and no gate
restates the number.
"""

from __future__ import annotations

import pandas as pd

from gates.base import Limits

TABLE = "slo"
METRICS: dict[str, str] = {
    "ttft_ms": "time to first token a critical interactive request must meet, ms",
    "critical_max_prompt_tokens": "interactive requests with longer prompts are not critical traffic",
}
TTFT_MS = f"{TABLE}.ttft_ms"
CRITICAL_MAX_PROMPT_TOKENS = f"{TABLE}.critical_max_prompt_tokens"

GROUPS: dict[str, str] = {
    "critical": "critical interactive requests",
    "long_prompt": "interactive requests with longer prompts",
    "batch": "batch requests",
    "system": "system requests",
}
"""How gates that bound a share per kind of traffic split it (each bound named `max_<group>_fraction`):
critical chat, interactive requests with longer prompts (a long document a user chose to send),
and the batch and system classes."""


def group_metric(group: str) -> str:
    """The name of a group's bound: `max_<group>_fraction`."""
    return f"max_{group}_fraction"


def group_metrics(what: str) -> dict[str, str]:
    """Every group's bound -> what it bounds: the share of the group's requests `what` says."""
    return {group_metric(group): f"share of the {described} {what}" for group, described in GROUPS.items()}


def critical(requests: pd.DataFrame, limits: Limits) -> pd.DataFrame:
    """Critical requests: interactive class, prompt of at most the bound."""
    return interactive_up_to(requests, limits[CRITICAL_MAX_PROMPT_TOKENS])


def interactive_up_to(requests: pd.DataFrame, max_prompt_tokens: float) -> pd.DataFrame:
    """Interactive requests with a prompt of at most `max_prompt_tokens` (an unknown size is kept:
    a client that could not count its prompt still sent chat traffic)."""
    prompt = requests["prompt_tokens"]
    short = prompt.isna() | (prompt <= max_prompt_tokens)
    return requests[(requests["traffic_class"] == "interactive") & short]


def group_of(requests: pd.DataFrame, limits: Limits) -> pd.Series:
    """Each request's group (`GROUPS`): critical, long_prompt (interactive, not critical), or its class."""
    groups = requests["traffic_class"].where(requests["traffic_class"] != "interactive", "long_prompt")
    return groups.mask(requests.index.isin(critical(requests, limits).index), "critical")
