"""Did the run exercise the prefix cache? The measured hit ratio beside what the workload allowed.

One wording for the console of `kvgate run` and the run report (a red line in both):

    reuse_line(record)        "prefix hits: 12.0% of prompt tokens (fleet); an infinite cache: 37.3% ..."
    cache_warning(record)     the loud line, or None when the cache was exercised (or nothing says)

A cache was not exercised when the workload's shared prefixes are all shorter than one block of
the target (`meta.prefix_reuse.longest_shared_tokens` below its `block_tokens`: no block can
ever hit), or when the target counted prompt tokens looked up and not one of them hit. Its PASS
then says nothing about reuse, eviction or routing by prefix, however good the other figures.
"""

from __future__ import annotations

from record.fleet import replica_names
from record.query import measured_hit_ratio
from record.run_record import RunRecord


def reuse_line(record: RunRecord) -> str | None:
    """The measured ratio (the fleet's behind a gateway) and the workload's bound; None when
    neither is known."""
    measured, reuse = measured_hit_ratio(record), record.meta.prefix_reuse
    if measured is None and reuse is None:
        return None
    who = " (fleet)" if replica_names(record) else ""
    line = "prefix hits: " + ("not counted by the target" if measured is None else f"{measured:.1%} of prompt tokens")
    if reuse is not None:
        line += (
            f"{who}; an infinite cache with {reuse.block_tokens}-token blocks would hit {reuse.bound:.1%} of "
            f"this trace (its longest shared prefix: {reuse.longest_shared_tokens} tokens)"
        )
    else:
        line += who
    return line


def cache_warning(record: RunRecord) -> str | None:
    reuse = record.meta.prefix_reuse
    if reuse is not None and reuse.longest_shared_tokens < reuse.block_tokens:
        return (
            f"CACHE NOT EXERCISED: the trace's shared prefixes are shorter than one block "
            f"(longest {reuse.longest_shared_tokens} tokens, blocks of {reuse.block_tokens}): no prompt can hit "
            f"the prefix cache, so this verdict says nothing about reuse"
        )
    measured = measured_hit_ratio(record)
    if measured == 0:
        return (
            "CACHE NOT EXERCISED: not one prompt token hit the prefix cache in this run, so this verdict says "
            "nothing about reuse (do the prompts share a whole block?)"
        )
    return None
