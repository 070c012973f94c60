"""The sim executor's synthetic attention: what h2o accumulates when no real model runs.

Real attention is heavy-tailed and has sinks: the first few tokens of a sequence draw a large,
steady share of every query's attention, and among the rest a small set of tokens (heavy
hitters) draws most of it, the same tokens step after step. The sim reproduces that shape,
deterministically, as a function of (request, absolute position) only:

    sinks    positions 0 .. SINK_TOKENS − 1 share SINK_MASS of each query's mass equally;
    others   share the rest in proportion to w(p) = u(p) ^ (−1 / PARETO_ALPHA),
             u(p) ∈ (0, 1] a hash of (request seed, p): Pareto weights, a few very large

so a token's share depends on which tokens are still held (it is normalised over them), but
its rank never changes. A step of `num_new` tokens spreads a mass of `num_new` (one per query),
like the torch executor's `StepOutcome.attention`; causality inside a chunk is ignored.

The mass is never materialised per step. In a step every held non-sink token gets its weight
times one scalar (the step's share over the held weights' total) and every sink one scalar, so
h2o's decayed sum `score ← decay · score + mass` has a closed form (`SyntheticScores`):

    score_T(p) = w(p) · Σ_{t = b..T} decay^(T−t) c_t = decay^T · w(p) · (H_T − H_{b−1}),
    H_T = Σ_{t ≤ T} c_t / decay^t

for a token born in step b, with c_t the step's scalar. One scalar per step and each new
token's weight and H at birth make a step O(new tokens) instead of O(KV tokens); the scores
are formed, in O(KV), only when h2o ranks them. `synthetic_attention` is the same
distribution materialised, the definition the closed form is tested against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference_engine.request import Request

SINK_TOKENS = 4
SINK_MASS = 0.25
PARETO_ALPHA = 1.2
_GOLDEN, _MIX = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9)
_RESCALE_BELOW = 1e-150  # decay^T this small: fold it into the stored values (far from underflow)


def synthetic_weights(seed: int, positions: np.ndarray) -> np.ndarray:
    """w(p) of each position; 0 for the sinks, whose share does not depend on weights."""
    x = np.uint64(seed & 0xFFFFFFFFFFFFFFFF) ^ (positions.astype(np.uint64) * _GOLDEN)
    x = x * _MIX
    u = ((x >> np.uint64(11)).astype(np.float64) + 1.0) / 2.0**53
    weights = u ** (-1.0 / PARETO_ALPHA)
    weights[positions < SINK_TOKENS] = 0.0
    return weights


def _shares(total: float, num_sinks: int) -> tuple[float, float]:
    """Per query: the mass per unit of weight of the others, and the mass of each sink."""
    others = 1.0 - SINK_MASS if num_sinks else 1.0
    per_weight = others / total if total > 0 else 0.0
    per_sink = (SINK_MASS if total > 0 else 1.0) / num_sinks if num_sinks else 0.0
    return per_weight, per_sink


def synthetic_attention(seed: int, positions: np.ndarray, num_new: int) -> np.ndarray:
    """Mass per KV token (at absolute `positions`, in KV order) for a step of `num_new` queries."""
    weights = synthetic_weights(seed, positions)
    sinks = positions < SINK_TOKENS
    per_weight, per_sink = _shares(weights.sum(), int(sinks.sum()))
    mass = weights * per_weight
    mass[sinks] = per_sink
    return mass * num_new


@dataclass(frozen=True, slots=True)
class SyntheticAttention:
    """One request's synthetic attention in one step, not materialised: the sim's
    `StepOutcome.attention` value. h2o accumulates it with `SyntheticScores`."""

    seed: int
    num_new: int  # queries in the step


class SyntheticScores:
    """h2o's accumulated scores of one running request under the synthetic attention, in closed
    form (module docstring). Per KV token, in KV order: its weight (0 for a sink) and its birth
    value, the accumulator when it was born (`_h` for others, `_h_sink` for sinks); the sinks,
    positions below SINK_TOKENS, are always the leading KV tokens. `_scale` is decay^T, folded
    into the stored values whenever it gets small, so nothing under- or overflows.

    A step costs O(new tokens): the per-token arrays are buffers grown by doubling, and the
    weights of the positions a request computes next (always the next ones in order) come
    from a window computed `_AHEAD` positions at a time."""

    _AHEAD = 256

    def __init__(self, seed: int, decay: float) -> None:
        self.seed, self.decay = seed, decay
        self._weights = np.zeros(self._AHEAD)  # [: _len] in use
        self._born = np.zeros(self._AHEAD)
        self._len = 0
        self._total = 0.0  # Σ weights held
        self._num_sinks = 0
        self._h = self._h_sink = 0.0
        self._scale = 1.0
        self._ahead_from, self._ahead = 0, np.zeros(0)  # weights of positions _ahead_from, ...

    def __len__(self) -> int:
        return self._len

    def add_step(self, r: Request, attention: SyntheticAttention) -> None:
        """`r` ran a step of `attention.num_new` queries; its KV (after the step) extends ours."""
        held, n = self._len, r.num_kv_tokens
        if n == held + 1 and self._fresh(r, held):  # a decode: one new token, the next position
            self._append_one(self._weights_of(r.num_computed_tokens - 1, 1).item(0))
        elif n > held:
            self._append(
                self._weights_of(r.num_computed_tokens - (n - held), n - held)
                if self._fresh(r, held)
                else synthetic_weights(self.seed, r.kv_positions(start=held))
            )
        self._scale *= self.decay
        per_weight, per_sink = _shares(self._total, self._num_sinks)
        self._h += attention.num_new * per_weight / self._scale
        self._h_sink += attention.num_new * per_sink / self._scale
        if self._scale < _RESCALE_BELOW:
            self._rescale()

    def add_steps(self, first: int, chunk: int, num_steps: int) -> None:
        """`add_step` `num_steps` times, for steps of `chunk` queries each computing the next
        positions from `first` on (fresh ones: none a sink, after every token held), in array
        operations whose floats are the same: running sums and products accumulate one element
        after another (`ufunc.accumulate`), exactly as the per-step `+=` and `*=` do."""
        while num_steps:
            run = np.full(num_steps + 1, self.decay)
            run[0] = self._scale
            scales = np.multiply.accumulate(run)[1:]
            steps = num_steps if scales[-1] >= _RESCALE_BELOW else int((scales < _RESCALE_BELOW).argmax()) + 1
            count = chunk * steps
            new = self._weights_of(first, count)
            run = np.empty(steps + 1)
            run[0] = self._total
            run[1:] = new if chunk == 1 else [new[i : i + chunk].sum() for i in range(0, count, chunk)]
            totals = np.add.accumulate(run)[1:]
            per_weight, per_sink = _shares(1.0, self._num_sinks)  # per unit of the total; the sinks' is fixed
            run[0] = self._h
            run[1:] = chunk * (per_weight / totals) / scales[:steps]
            h = np.add.accumulate(run)
            if per_sink:
                run[0] = self._h_sink
                run[1:] = chunk * per_sink / scales[:steps]
                self._h_sink = float(np.add.accumulate(run)[-1])
            self._reserve(count)
            held = self._len
            self._weights[held : held + count] = new
            self._born[held : held + count] = h[:-1] if chunk == 1 else h[:-1].repeat(chunk)
            self._len = held + count
            self._total, self._h, self._scale = float(totals[-1]), float(h[-1]), float(scales[steps - 1])
            if self._scale < _RESCALE_BELOW:
                self._rescale()
            first, num_steps = first + count, num_steps - steps

    def in_step(self, r: Request) -> bool:
        """Whether these scores cover `r`'s KV as it is and its next tokens are fresh ones, so
        `add_steps` may stand for its coming steps."""
        return self._len == r.num_kv_tokens and self._fresh(r, self._len)

    @staticmethod
    def _fresh(r: Request, held: int) -> bool:
        """Whether the KV tokens from index `held` on are the last computed ones, in order, none
        a sink (the common case: the positions follow one another)."""
        kept = r.kept_positions
        return held >= (0 if kept is None else len(kept)) and held + r.num_dropped_tokens >= SINK_TOKENS

    def _weights_of(self, first: int, count: int) -> np.ndarray:
        """w of positions first .. first + count − 1, none a sink."""
        offset = first - self._ahead_from
        if offset < 0 or offset + count > len(self._ahead):
            self._ahead_from, offset = first, 0
            self._ahead = synthetic_weights(self.seed, np.arange(first, first + max(count, self._AHEAD)))
        return self._ahead[offset : offset + count]

    def _reserve(self, count: int) -> None:
        """Room for `count` more tokens (capacity doubles: O(1) amortised per token)."""
        held = self._len
        if held + count > len(self._weights):
            size = max(2 * len(self._weights), held + count)
            self._weights = np.concatenate((self._weights[:held], np.zeros(size - held)))
            self._born = np.concatenate((self._born[:held], np.zeros(size - held)))

    def _append_one(self, weight: float) -> None:
        """`_append` for one token that is no sink, without array slices (most steps are decodes)."""
        self._reserve(1)
        held = self._len
        self._weights[held] = weight
        self._born[held] = self._h
        self._len = held + 1
        self._total += weight

    def _append(self, new: np.ndarray) -> None:
        self._reserve(len(new))
        held, count = self._len, len(new)
        self._weights[held : held + count] = new
        new_sinks = count - int(np.count_nonzero(new)) if held < SINK_TOKENS else 0  # weights are ≥ 1, sinks 0
        self._born[held : held + new_sinks] = self._h_sink
        self._born[held + new_sinks : held + count] = self._h
        self._len = held + count
        self._num_sinks += new_sinks
        self._total += float(new.sum())

    def values(self) -> np.ndarray:
        """The scores, one per KV token in KV order. O(KV tokens)."""
        held, s = self._len, self._num_sinks
        scores = self._weights[:held] * (self._h - self._born[:held])
        scores[:s] = self._h_sink - self._born[:s]
        return scores * self._scale

    def negated(self, start: int, stop: int) -> np.ndarray:
        """−values()[start:stop], the same floats (rounding is symmetric in sign, and
        born − h = −(h − born) exactly), in one pass fewer and over the range only: what h2o
        ranks at a compaction."""
        s = self._num_sinks
        out = self._weights[start:stop] * (self._born[start:stop] - self._h)
        if start < s:
            out[: s - start] = self._born[start : min(s, stop)] - self._h_sink
        out *= self._scale
        return out

    def keep(self, indices: np.ndarray) -> None:
        """A compaction kept the KV tokens at sorted `indices`."""
        count = len(indices)
        self._weights[:count] = self._weights[indices]
        self._born[:count] = self._born[indices]
        self._len = count
        self._total = float(self._weights[:count].sum())
        self._num_sinks = int(np.searchsorted(indices, self._num_sinks))

    def _rescale(self) -> None:
        held, s = self._len, self._num_sinks
        self._born[s:held] = (self._born[s:held] - self._h) * self._scale
        self._born[:s] = (self._born[:s] - self._h_sink) * self._scale
        self._h = self._h_sink = 0.0
        self._scale = 1.0
