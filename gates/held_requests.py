"""Cancel → release from outside the engine: its request counts against the client's open requests.

A target without engine events (vLLM, SGLang, llama.cpp) still says, in its metrics, how many
requests it holds (`num_running + num_waiting`, polled every few tens of milliseconds during a
cancel storm). The client knows how many it still waits for: every request sent and not yet
answered, failed or hung up. When the engine holds more than that, it holds work nobody waits
for — a cancelled request not yet released. So a cancel at `t` (the client's hang-up, `done_s`)
is released no later than the first poll at or after `t` at which

    engine holds <= client has open

and the time until that poll bounds its cancel → release latency from above (to within one poll
interval). A cancel after which the engine never again holds no more than the client waits for
was never released (infinite). Requests the target refused (4xx/5xx) never held anything and are
not cancels. A request on its way to the engine (sent, not yet counted there) can hide a
held cancel for the moments it is in transit: the bound is that of a polling observer, stated as
such in the gate's evidence.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from record.query import intended_cancels
from record.run_record import RunRecord


def polled_counts(record: RunRecord) -> pd.DataFrame:
    """The samples that say how many requests the engine holds: t_s and `held`, in time order."""
    samples = record.samples.dropna(subset=["num_running"])
    held = samples["num_running"] + samples["num_waiting"].fillna(0)
    return pd.DataFrame({"t_s": samples["t_s"].to_numpy(), "held": held.to_numpy()}).sort_values("t_s", kind="stable")


def client_open(requests: pd.DataFrame, t_s: np.ndarray) -> np.ndarray:
    """How many requests the client had sent and not finished at each time of `t_s`."""
    sent = np.sort(requests["sent_s"].dropna().to_numpy())
    done = np.sort(requests["done_s"].fillna(math.inf).to_numpy())
    return np.searchsorted(sent, t_s, side="right") - np.searchsorted(done, t_s, side="right")


def polled_cancel_latencies(record: RunRecord) -> dict[str, float]:
    """Client request id -> upper bound of seconds from hang-up to release (inf: never)."""
    counts = polled_counts(record)
    requests = record.requests
    cancels = requests[intended_cancels(requests) & requests["done_s"].notna() & _not_refused(requests)]
    if counts.empty or cancels.empty:
        return {}
    t = counts["t_s"].to_numpy()
    clear = counts["held"].to_numpy() <= client_open(requests, t)
    # next_clear[i]: the first index >= i at which the engine held nothing abandoned (len(t): none)
    next_clear = np.full(len(t) + 1, len(t))
    for i in range(len(t) - 1, -1, -1):
        next_clear[i] = i if clear[i] else next_clear[i + 1]
    latency: dict[str, float] = {}
    for rid, t_cancel in zip(cancels["request_id"].astype(str), cancels["done_s"].astype(float)):
        i = next_clear[np.searchsorted(t, t_cancel, side="left")]
        latency[rid] = math.inf if i == len(t) else float(t[i] - t_cancel)
    return latency


def poll_interval_s(record: RunRecord) -> float | None:
    """The median time between two polls (None with fewer than two)."""
    t = polled_counts(record)["t_s"]
    return float(t.diff().median()) if len(t) >= 2 else None


def _not_refused(requests: pd.DataFrame) -> pd.Series:
    status = pd.to_numeric(requests["http_status"], errors="coerce")
    return status.isna() | (status < 400)
