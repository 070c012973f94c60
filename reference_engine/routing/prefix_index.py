"""The fleet's prefix index: which worker holds which prompt blocks, by content.

Fed with each worker's KV cache events (core/kv_events.py), as llm-d's precise prefix-cache
scheduler and Dynamo's KV router are fed with vLLM's. A worker's block hashes are keyed with a
secret of its process (core/prefix_hash.py), so no one else can compute them for a new prompt;
the index keys blocks by content instead, with its own chained keys over the token ids that
every BlockStored carries (llm-d does the same):

    key_0 = hash((ROOT, tokens of block 0))      key_i = hash((key_{i-1}, tokens of block i))

and maps each worker's engine hashes to those keys, so that a BlockStored whose parent is an
earlier block chains from that block's key, and a BlockRemoved (hashes only) finds what to drop.
Blocks without tokens (replay: a trace names its prompts by ids) are keyed by their engine hash,
which there is the same in every engine. Keys are Python's tuple hash of ints: the same in every
process, 64 bits, a hint for routing (a collision mis-routes one request, nothing more).

Tenants: the keys ignore them. Two tenants' identical tokens share a key, so a request may be
sent to a worker that holds the same text under another tenant's scope; that worker does not hit
(it scopes every block, core/prefix_hash.py), so the cost is one mis-routed request, never a
shared block. (Putting tenants in the key would need the router to repeat the engine's scoping
rules, public prefixes and salts included, in a second copy.)

Invariants: `_keys[w]` maps every engine hash worker w announced and did not remove to its key;
`_holders[key][w]` counts w's engine hashes with that key (two tenants' copies of one text), and
a key or worker with no hash left is dropped. Costs: an event O(its blocks), `match` O(matched
blocks × workers holding them), `clear(w)` O(w's blocks).
"""

from __future__ import annotations

from collections.abc import Sequence

from reference_engine.core.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KvCacheEvent

ROOT = 0x6B7667617465  # the parent key of a prompt's first block


def chain_keys(parent: int, token_ids: Sequence[int], block_size: int) -> list[int]:
    """The content keys of the full blocks of `token_ids`, chained from `parent`."""
    keys = []
    for at in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash((parent, *token_ids[at : at + block_size]))
        keys.append(parent)
    return keys


def prompt_keys(token_ids: Sequence[int], block_size: int) -> list[int]:
    """The content keys of a prompt's full blocks: what `PrefixIndex.match` looks up."""
    return chain_keys(ROOT, token_ids, block_size)


class PrefixIndex:
    """See the module docstring. Only its owner (a router, a fleet replay) calls the mutators."""

    def __init__(self) -> None:
        self._keys: dict[int, dict[int, int]] = {}  # worker -> engine hash -> content key
        self._holders: dict[int, dict[int, int]] = {}  # content key -> worker -> number of its hashes
        self.num_unchained = 0  # stored blocks dropped: their parent was never announced (a lost batch)

    def apply(self, worker: int, event: KvCacheEvent) -> None:
        if isinstance(event, BlockStored):
            self._stored(worker, event)
        elif isinstance(event, BlockRemoved):
            self._removed(worker, event.block_hashes)
        elif isinstance(event, AllBlocksCleared):
            self.clear(worker)

    def _stored(self, worker: int, event: BlockStored) -> None:
        known = self._keys.setdefault(worker, {})
        if not event.token_ids:
            keys = list(event.block_hashes)
        else:
            parent = ROOT if event.parent_block_hash is None else known.get(event.parent_block_hash)
            if parent is None:
                self.num_unchained += len(event.block_hashes)
                return
            keys = chain_keys(parent, event.token_ids, event.block_size)
        for engine_hash, key in zip(event.block_hashes, keys):
            if engine_hash in known:
                continue  # announced again (two requests computed it at once): a set, not a count
            known[engine_hash] = key
            holders = self._holders.setdefault(key, {})
            holders[worker] = holders.get(worker, 0) + 1

    def _removed(self, worker: int, block_hashes: Sequence[int]) -> None:
        known = self._keys.get(worker)
        if not known:
            return
        for engine_hash in block_hashes:
            key = known.pop(engine_hash, None)
            if key is not None:
                self._drop(key, worker)

    def _drop(self, key: int, worker: int) -> None:
        holders = self._holders[key]
        if holders[worker] > 1:
            holders[worker] -= 1
            return
        del holders[worker]
        if not holders:
            del self._holders[key]

    def clear(self, worker: int) -> None:
        """Forget everything `worker` holds (it died, or said AllBlocksCleared)."""
        for key in self._keys.pop(worker, {}).values():
            self._drop(key, worker)

    def clear_all(self) -> None:
        self._keys.clear()
        self._holders.clear()

    def match(self, keys: Sequence[int]) -> dict[int, int]:
        """{worker: how many leading `keys` it holds}, for every worker holding at least the first."""
        matched: dict[int, int] = {}
        alive: set[int] | None = None
        for n, key in enumerate(keys):
            holders = self._holders.get(key)
            still = set() if not holders else set(holders) if alive is None else alive.intersection(holders)
            for worker in (alive or set()) - still:
                matched[worker] = n
            alive = still
            if not alive:
                return matched
        for worker in alive or ():
            matched[worker] = len(keys)
        return matched

    def num_blocks(self, worker: int) -> int:
        """The blocks `worker` is known to hold."""
        return len(self._keys.get(worker, ()))
