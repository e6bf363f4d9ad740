"""What the store's methods return: small frozen dataclasses."""

from __future__ import annotations

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


@dataclass(frozen=True, slots=True)
class Remembered:
    """Result of remember, whitelist and recall.

    ``score`` is the memory's score after the call; ``evicted`` the ids moved
    to the cold tier and ``demoted`` the ids taken off the whitelist by this
    call; ``over`` how far the hot tier is still above max_hot after it: only
    whitelisted and protected memories were left to evict, or the call's
    bounded work left the rest to later calls (see ``Stats.backlog``).
    """

    id: str
    score: float
    evicted: tuple[str, ...]
    demoted: tuple[str, ...]
    over: int


@dataclass(frozen=True, slots=True)
class Batch:
    """What ``remember_many`` did: each item's id and score right after it
    was remembered, in order; then evicted, demoted and over as in
    :class:`Remembered`, for the whole batch."""

    ids: tuple[str, ...]
    scores: tuple[float, ...]
    evicted: tuple[str, ...]
    demoted: tuple[str, ...]
    over: int


@dataclass(frozen=True, slots=True)
class Evicted:
    """Result of evict: the ids moved to the cold tier and taken off the
    whitelist, how far over max_hot the hot tier still is, and the backlog
    left (as :class:`Stats`; call evict again until it is 0 to drain it)."""

    evicted: tuple[str, ...]
    demoted: tuple[str, ...]
    over: int
    backlog: int


@dataclass(frozen=True, slots=True)
class Stats:
    """Counts of one namespace. ``hot`` includes whitelisted and protected
    memories; ``cold`` counts at most cold_max; ``over`` is how far the hot
    tier is above max_hot; ``backlog`` counts the memories waiting for work
    that bounded calls left to later ones (0: the policy holds as if it
    always had)."""

    hot: int
    cold: int
    whitelisted: int
    protected: int
    over: int
    backlog: int
