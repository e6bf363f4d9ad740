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
    0 for one a later item's group dropped); the ids the items' groups ``moved``
    (brought back from the cold tier, or dropped); and, when asked
    (``evicted_texts=True``), each evicted memory's text as it left, in the order of
    ``evicted`` (None for one stored without)."""

    ids: tuple[str, ...]
    scores: tuple[float, ...]
    evicted: tuple[str, ...]
    demoted: tuple[str, ...]
    over: int
    over_tokens: int = 0
    version: int = 0
    orders: tuple[int, ...] = ()
    moved: tuple[str, ...] = ()
    evicted_texts: tuple[str | None, ...] = ()


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


@dataclass(frozen=True, slots=True)
class Eviction:
    """One entry of a namespace's eviction log (``Policy.log_max``): a memory that left
    a tier, written by the call that moved it. ``reason`` is one of max_hot, max_tokens
    or evict_batch (hot to cold: the budget it was over, or the extra ones of
    ``evict_batch``), cold_max (cold to deleted), whitelist_cap or demote (whitelisted to
    hot), forget (to deleted); ``score`` and ``importance`` as it left, ``at`` the call's
    time in ms. ``log_id`` is the log entry's: pass it as ``since`` to read what came
    after it."""

    log_id: str
    id: str
    reason: str
    from_tier: str  # hot, whitelist or cold
    to_tier: str  # cold, hot or deleted
    score: float
    importance: float
    at: int
    group: str


# What explain says of a memory: which index holds it (absent: no such memory).
Standing = Literal["hot", "protected", "whitelisted", "cold", "absent"]
# Why a hot memory is not in window(tokens) (lua/explain.lua's header).
Reason = Literal["cold", "ranked_out", "does_not_fit", "group_does_not_fit", "stopped", "tied"]
Clock = Literal["activity", "wall"]


@dataclass(frozen=True, slots=True)
class ScoreParts:
    """What a memory's score is made of (docs/rules.md, rules 1 to 4): the score is
    ``(importance x boost + jitter) x recency x decay`` (:attr:`product`), or the
    policy's score_min when ``floored``.

    ``boost`` is whitelist_boost for a whitelisted memory, else 1; ``jitter`` its
    tie-breaking offset; ``recency`` is ``0.5 ** (age / half_life)``, ``age`` counted
    since its last access on the namespace's ``clock`` ("activity": memories
    remembered; "wall": seconds) at the half-life in force now; ``decay`` the product
    of the ``decay()`` rates it took in the hot tier since. A whitelisted memory does
    not decay: its recency and decay are 1 (``age`` is still its age)."""

    importance: float
    boost: float
    jitter: float
    recency: float
    age: float
    half_life: float
    clock: Clock
    decay: float
    floored: bool

    @property
    def product(self) -> float:
        """The unfloored score: ``(importance x boost + jitter) x recency x decay``."""
        return (self.importance * self.boost + self.jitter) * self.recency * self.decay


@dataclass(frozen=True, slots=True)
class Protection:
    """A memory's protection from eviction (docs/rules.md, rule 5) at the time of the
    call: ``protected`` by time (``by_time``: ``until``, ms, lies ahead) or by activity
    (``by_activity``: one of the protect_memories newest, until the namespace's order,
    ``order_now``, reaches ``until_order``; 0 when not protected that way). ``order``
    is the memory's own (the namespace's order at its first remember). A cold memory
    is not protected."""

    protected: bool
    by_time: bool
    by_activity: bool
    until: int
    until_order: int
    order: int
    order_now: int


@dataclass(frozen=True, slots=True)
class WindowFit:
    """Whether ``window(tokens)`` holds a memory and, if not, why (``reason``: "cold";
    "ranked_out", the memories ranked above it used the whole budget; "does_not_fit" or
    "group_does_not_fit", its ``cost`` is more than the ``left`` tokens at its turn;
    "stopped", it would fit but the window stopped before its turn, after 100
    candidates in a row that did not fit). ``left``: ``tokens`` less what the
    memories and whole groups ranked above it take; ``cost``: its tokens, or its
    group's (every member in its tier: the window takes a group whole)."""

    tokens: int
    included: bool
    reason: Reason | None
    left: int
    cost: int


@dataclass(frozen=True, slots=True)
class Explanation:
    """What ``explain(id)`` returns: why a memory ranks where it does. ``tier``: where
    the store holds it ("hot": evictable; "protected": in the protected index;
    "whitelisted"; "cold"; "absent": no such memory, and every other field None);
    ``memory`` as ``get`` returns it; its score's ``parts``; its ``protection``; its
    ``rank`` among the hot memories as ``top`` orders them (1: the first; None for a
    cold memory, or when more than 200 memories of one index tie its score); with
    ``tokens``, its place in that ``window``."""

    id: str
    tier: Standing
    memory: Memory | None = None
    parts: ScoreParts | None = None
    protection: Protection | None = None
    rank: int | None = None
    window: WindowFit | None = None
