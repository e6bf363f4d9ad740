"""What the store's methods return: small frozen dataclasses."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

Tier = Literal["hot", "cold"]


@dataclass(frozen=True, slots=True)
class Memory:
    """One memory as it stands at the time of the call.

    Times are milliseconds since the Unix epoch. ``score`` is
    importance x recency x boost at that time (floored at the policy's
    score_min unless whitelisted).
    """

    id: str
    importance: float
    score: float
    tier: Tier
    whitelisted: bool
    protected_until: int
    created: int
    last_access: int
    text: str | None
    tokens: int = 1
    group: str | None = None


@dataclass(frozen=True, slots=True)
class Match:
    """A memory a search found, with its relevance to the query (higher: better)."""

    relevance: float
    memory: Memory


@dataclass(frozen=True, slots=True)
class Remembered:
    """Result of remember, whitelist and recall.

    ``score`` is the memory's score after the call; ``evicted`` the ids moved
    to the cold tier and ``demoted`` the ids taken off the whitelist by this
    call; ``over`` and ``over_tokens`` how far the hot tier is still above
    max_hot and max_tokens after it: only whitelisted and protected memories
    (or groups holding one) were left to evict, or the call's bounded work
    left the rest to later calls (see ``Stats.backlog``).
    """

    id: str
    score: float
    evicted: tuple[str, ...]
    demoted: tuple[str, ...]
    over: int
    over_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Batch:
    """What ``remember_many`` did: each item's id and score right after it
    was remembered, in order; then evicted, demoted, over and over_tokens as
    in :class:`Remembered`, for the whole batch; the namespace's ``version`` the
    call made (every call that writes makes one: the one before is ``version - 1``);
    each item's ``order`` (its place in a window, the order of its first remember;
    0 for one a later item's group dropped); and the ids the items' groups ``moved``
    (brought back from the cold tier, or dropped)."""

    ids: tuple[str, ...]
    scores: tuple[float, ...]
    evicted: tuple[str, ...]
    demoted: tuple[str, ...]
    over: int
    over_tokens: int = 0
    version: int = 0
    orders: tuple[int, ...] = ()
    moved: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Evicted:
    """Result of evict: the ids moved to the cold tier and taken off the
    whitelist, how far over max_hot the hot tier still is, the backlog
    left (as :class:`Stats`; call evict again until it is 0 to drain it), and
    how far over max_tokens the hot tier still is."""

    evicted: tuple[str, ...]
    demoted: tuple[str, ...]
    over: int
    backlog: int
    over_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Stats:
    """Counts of one namespace. ``hot`` includes whitelisted and protected
    memories; ``cold`` counts at most cold_max; ``over`` is how far the hot
    tier is above max_hot; ``backlog`` counts the work that bounded calls
    left to later ones (0: the policy holds as if it always had); ``tokens``
    is the hot tier's total tokens and ``over_tokens`` how far it is above
    max_tokens."""

    hot: int
    cold: int
    whitelisted: int
    protected: int
    over: int
    backlog: int
    tokens: int = 0
    over_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Window:
    """What ``window`` returns: the memories for a prompt, in the order they
    were first remembered; ``tokens`` their total, ``left`` the hot memories
    not in the window; ``epoch`` the ms at which the namespace began, which changes
    only when it is created again after its keys were lost (FLUSHDB, idle_ttl_s, a
    restart without persistence); ``recalled``: the ids of the memories a query
    brought (its share of the budget). Iterating it iterates ``memories``."""

    memories: tuple[Memory, ...]
    tokens: int
    left: int
    epoch: int = 0
    recalled: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[Memory]:
        return iter(self.memories)

    def __len__(self) -> int:
        return len(self.memories)


@dataclass(frozen=True, slots=True)
class Context:
    """What ``context`` returns: the (id, text) of the memories ``window`` would return
    for the same budget, in the same order (text None for a memory stored without);
    ``tokens``, ``left`` and ``epoch`` as in :class:`Window`; ``recalled``: the ids of
    the items a query brought (its share of the budget); ``version``: the
    namespace's version read (see :class:`Batch`); with ``detail=True``, each item's
    tokens (``sizes``) and order (``orders``), else empty. Iterating it iterates
    ``items``."""

    items: tuple[tuple[str, str | None], ...]
    tokens: int
    left: int
    epoch: int
    recalled: tuple[str, ...] = ()
    version: int = 0
    sizes: tuple[int, ...] = ()
    orders: tuple[int, ...] = ()

    def __iter__(self) -> Iterator[tuple[str, str | None]]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True, slots=True)
class ScanPage:
    """One page of ``scan``: its memories and the cursor of the next page
    (0: the scan is done)."""

    cursor: int
    memories: tuple[Memory, ...]


@dataclass(frozen=True, slots=True)
class Version:
    """A namespace's version as its state holds it: the ``epoch`` (its incarnation: it
    changes when the namespace is made again), the ``version`` (every call that writes
    makes a new one) and the hot tier's ``tokens``. The same epoch and version: the
    namespace has not changed since."""

    epoch: int
    version: int
    tokens: int
