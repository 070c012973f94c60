"""One KV tier below the GPU pool (host DRAM or disk): cached prefix blocks by content key, in
LRU order, with a capacity and a per-tenant cap.

A block here is known by its key alone: the chained, scoped prefix hash it had in the GPU pool.
The hash already contains the tenant's (or the salt's, or the public) scope, so a lookup can
only find what the same scope computed: scoping holds in every tier without a second check.

Each entry carries a checksum of its content (in the sim a function of the key), written when
the block arrives and checked when it is served: a tier never hands out a block whose content
does not match its key (`verify`).

Every operation is O(1) or O(blocks touched): one `OrderedDict` in LRU order over the whole
tier, and one per tenant in the same order, so a tenant over its cap evicts its own oldest
block, never another tenant's.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TypeVar

T = TypeVar("T", bound=tuple)


def content_checksum(key: int) -> int:
    """The checksum the sim stores with a block: its content is a function of its key."""
    return (key * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & 0xFFFFFFFFFFFFFFFF


class TierStore:
    """An LRU set of content keys with `capacity_blocks` slots; tenant `t` holds at most
    `tenant_caps[t]` of them (public blocks, tenant None, are uncapped)."""

    def __init__(self, name: str, capacity_blocks: int, tenant_caps: Mapping[str, int]) -> None:
        self.name = name
        self.capacity_blocks = capacity_blocks
        self._caps = dict(tenant_caps)
        self._lru: OrderedDict[int, tuple[str | None, int]] = OrderedDict()  # key -> (tenant, checksum)
        self._by_tenant: dict[str | None, OrderedDict[int, None]] = {}
        self.attached = True
        # every block that came in went out by one of two ways or is still here (`num_leaked`)
        self.num_stored = 0  # blocks written in (demotions)
        self.num_evicted = 0  # blocks evicted to make room (capacity or tenant cap)
        self.num_dropped = 0  # blocks forgotten without eviction (detach, failed load)

    def __len__(self) -> int:
        return len(self._lru)

    def __contains__(self, key: int) -> bool:
        return key in self._lru

    @property
    def num_leaked(self) -> int:
        """Blocks that came in and are neither here nor counted out: 0 unless a path forgot one."""
        return self.num_stored - self.num_evicted - self.num_dropped - len(self._lru)

    def tenant_blocks(self, tenant: str | None) -> int:
        entries = self._by_tenant.get(tenant)
        return len(entries) if entries else 0

    def touch(self, key: int) -> bool:
        """Mark `key` most recently used; False when the tier does not hold it."""
        if key not in self._lru:
            return False
        self._lru.move_to_end(key)
        self._by_tenant[self._lru[key][0]].move_to_end(key)
        return True

    def not_held(self, items: list[T]) -> list[T]:
        """Of `items` (tuples whose first field is a key), those the tier does not hold; the
        ones it holds are touched. One pass at C speed for the common all-new batch."""
        lru = self._lru
        if lru.keys().isdisjoint([it[0] for it in items]):
            return items
        return [it for it in items if not self.touch(it[0])]

    def put_many(self, items: Sequence[tuple[int, str | None]]) -> list[tuple[int, str | None]]:
        """Store each (key, tenant) of `items` in order (none held yet); returns the (key,
        tenant) of the blocks evicted to make room, oldest first: the tenant's own oldest when it
        is at its cap, else the tier's. One call per eviction batch (the demotion path)."""
        evicted: list[tuple[int, str | None]] = []
        lru, by_tenant, caps, capacity = self._lru, self._by_tenant, self._caps, self.capacity_blocks
        if self._put_one_tenant(items, evicted):
            return evicted
        stored = 0
        for key, tenant in items:
            assert key not in lru, "put_many() keys the tier does not hold (touch() otherwise)"
            cap = caps.get(tenant) if tenant is not None else None
            if capacity <= 0 or cap is not None and cap <= 0:
                evicted.append((key, tenant))  # it cannot hold it at all: passed on unstored
                continue
            own = by_tenant.get(tenant)
            if own is None:
                own = by_tenant[tenant] = OrderedDict()
            if cap is not None and len(own) >= cap:
                evicted.append(self._pop(next(iter(own))))
            while len(lru) >= capacity:
                old, (owner, _) = lru.popitem(last=False)
                del by_tenant[owner][old]
                evicted.append((old, owner))
            lru[key] = (tenant, content_checksum(key))
            own[key] = None
            stored += 1
        self.num_stored += stored
        self.num_evicted += len(evicted) - (len(items) - stored)
        return evicted

    def _put_one_tenant(self, items: Sequence[tuple[int, str | None]], evicted: list[tuple[int, str | None]]) -> bool:
        """`put_many`'s common case in bulk: one tenant, under its cap, a batch the tier can hold.
        The same blocks go in the same order (the oldest `len + n - capacity` first). False, and
        nothing done, for any other batch."""
        n, lru, capacity = len(items), self._lru, self.capacity_blocks
        if not n or n > capacity:
            return False
        tenant = items[0][1]
        if [t for _, t in items].count(tenant) != n:
            return False
        own = self._by_tenant.get(tenant)
        cap = self._caps.get(tenant) if tenant is not None else None
        if cap is not None and (own is not None and len(own) or 0) + n > cap:
            return False
        if own is None:
            own = self._by_tenant[tenant] = OrderedDict()
        by_tenant = self._by_tenant
        for _ in range(len(lru) + n - capacity):
            old, (owner, _) = lru.popitem(last=False)
            del by_tenant[owner][old]
            evicted.append((old, owner))
        keys = [k for k, _ in items]
        assert lru.keys().isdisjoint(keys), "put_many() keys the tier does not hold (touch() otherwise)"
        lru.update(zip(keys, [(tenant, content_checksum(k)) for k in keys]))
        own.update(dict.fromkeys(keys))
        self.num_stored += n
        self.num_evicted += len(evicted)
        return True

    def _pop(self, key: int) -> tuple[int, str | None]:
        tenant = self._lru.pop(key)[0]
        del self._by_tenant[tenant][key]
        return key, tenant

    def evict_all(self) -> list[tuple[int, str | None]]:
        """Evict every block, oldest first (an offload pushes them down); returns (key, tenant)."""
        out = [(key, tenant) for key, (tenant, _) in self._lru.items()]
        self._lru.clear()
        self._by_tenant.clear()
        self.num_evicted += len(out)
        return out

    def drop(self, keys: Sequence[int]) -> list[int]:
        """Forget `keys` (those it holds); returns them."""
        out = [k for k in keys if k in self._lru]
        for k in out:
            self._pop(k)
        self.num_dropped += len(out)
        return out

    def drop_all(self) -> list[int]:
        """Forget every block (the tier was detached); returns their keys."""
        return self.drop(list(self._lru))

    def verify(self, key: int) -> bool:
        """Whether the block stored under `key` still holds that key's content."""
        entry = self._lru.get(key)
        return entry is not None and entry[1] == content_checksum(key)

    def check_invariants(self) -> None:
        """O(n) self-check for tests: the tenant orders partition the tier, within every cap."""
        assert len(self._lru) <= max(0, self.capacity_blocks)
        assert sum(len(v) for v in self._by_tenant.values()) == len(self._lru)
        for tenant, keys in self._by_tenant.items():
            assert all(self._lru[k][0] == tenant for k in keys)
            cap = self._caps.get(tenant) if tenant is not None else None
            assert cap is None or len(keys) <= cap, (tenant, len(keys), cap)
