"""How much of a trace any prefix cache could serve: the infinite-cache bound, at a block size.

    reuse = prefix_reuse(trace, block_tokens=16)    # record.run_record.PrefixReuse, or None
    reuse.bound                 # hit tokens / prompt tokens of a cache that never evicts
    reuse.longest_shared_tokens # the longest prefix one request shares with an earlier one

An infinite cache keeps every full block it ever saw, so a request hits the leading blocks of its
prompt that some earlier request had: no cache of any size, under any policy, hits more. The
blocks are those replay gives the engine (prefix_blocks.py `PrefixBlockMapper`): engine block i
is named by the trace's ids up to the trace block holding its last token, so equal keys are
equal prompt prefixes, and only full blocks count. A prefix shared by two requests but shorter
than one block of the target hits nothing: `longest_shared_tokens` below `block_tokens` says the
workload cannot exercise that cache at all. Every request is in one scope: the bound counts a
prefix any two requests share, whoever sent them (an engine that keeps tenants apart hits less).
A trace without prefix ids (Azure, BurstGPT) has no bound. O(prompt blocks) per request.
"""

from __future__ import annotations

from harness.replay.prefix_blocks import PrefixBlockMapper
from harness.replay.trace import Trace
from record.run_record import PrefixReuse

SCOPE = 0
"""One scope for every request: the bound shares across tenants (module docstring)."""


def prefix_reuse(trace: Trace, block_tokens: int) -> PrefixReuse | None:
    """The infinite-cache bound of `trace` (as sent: rescaled, resized and cut) in blocks of
    `block_tokens`; None without prefix ids or requests."""
    if not trace.prefix_block_tokens or not trace.requests:
        return None
    mapper = PrefixBlockMapper(
        block_tokens=block_tokens, trace_block_tokens=trace.prefix_block_tokens, public_scope=SCOPE
    )
    seen_blocks: set[int] = set()
    seen_prefixes: set[int] = set()  # chained hashes of every id prefix seen (ids equal up to j)
    hit_tokens = prompt_tokens = longest = 0
    for request in trace.requests:
        keys = mapper.map(request.prefix_ids, request.num_prompt_tokens, SCOPE).block_hashes
        num_hit = next((i for i, key in enumerate(keys) if key not in seen_blocks), len(keys))
        hit_tokens += num_hit * block_tokens
        prompt_tokens += request.num_prompt_tokens
        seen_blocks.update(keys)
        chain = _chain(request.prefix_ids)
        shared = next((j for j, h in enumerate(chain) if h not in seen_prefixes), len(chain))
        longest = max(longest, min(shared * trace.prefix_block_tokens, request.num_prompt_tokens))
        seen_prefixes.update(chain)
    return PrefixReuse(
        bound=hit_tokens / prompt_tokens if prompt_tokens else 0.0,
        block_tokens=block_tokens,
        longest_shared_tokens=longest,
        num_requests=len(trace.requests),
        source=str(trace.source),
    )


def _chain(ids: tuple[int, ...]) -> list[int]:
    """hash of ids[: j + 1] for every j, chained (equal exactly when the ids agree up to j)."""
    out, h = [], 0
    for block_id in ids:
        h = hash((h, block_id))
        out.append(h)
    return out
