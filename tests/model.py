"""A pure-Python model of memevict's eviction rules, for the model-based test.

Written from the rules of docs/rules.md and the script headers (lua/*.lua), not from
the scripts' bodies: it keeps scores as plain numbers (importance, jitter, last
access, decay ticks since the memory was placed) instead of the scripts'
forward-decay keys, and ranks memories by their score at ``now``.

The namespace's time never goes backwards (docs/rules.md, rule 9): a call's now
earlier than the latest now a write used is read as that latest now. That
keeps every memory's age >= 0, so ranking by score now is the scripts' ranking
by decay key. It also makes lazy protection expiry exact with a simple rule:
each script that evicts first expires protection at the same ``now``, so at
eviction time "evictable" is exactly "hot, not whitelisted, protected_until <=
now".
The model still tracks which memories the scripts have not yet moved out of
``fresh`` and ``prot`` (see ``_expire_protection``) so the test can check the
raw indexes too.

Protection by activity (protect_memories) is judged the same way, at the order
counter as each call leaves it (``newest``); a memory that a raised
protect_memories protects while it sits in an evictable index is put back
among the protected when eviction reaches it (``_enforce``), as the scripts do.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from memevict import Evicted, Memory, Policy, Remembered, Stats

# Two scores closer than this (relative; an absolute difference of their
# logarithms) are a near-tie: the store computes them in a different way with
# different rounding, so it may order them either way. Real ties are rarer
# still: every remember draws a distinct jitter offset.
NEAR_TIE = 1e-9

_TWO_32 = 2**32
# prot ranks a memory protected by activity alone at ACTIVITY + its order
# (lua/lib/memory.lua), above every protected-until ms.
ACTIVITY = 2**50
_FIBONACCI = 2654435769  # 2^32 / golden ratio, rounded to odd


class NearTie(Exception):
    """Two memories are near-tied where their order decides what happens."""


class Unknown(Exception):
    """The id is unknown: the store raises NotFound."""


class TooCostly(Exception):
    """A memory costs more than max_tokens: the store raises OverBudget."""


@dataclass
class Mem:
    """One memory as the model sees it."""

    id: str
    importance: float
    jitter: float
    created: int
    last_access: int
    protected_until: int
    # The namespace's count of remembers at the last access: where the
    # memory's age starts on the activity clock (last_access on the wall clock).
    last_seq: int = 0
    text: str | None = None
    whitelisted: bool = False
    cold: bool = False
    # D (the namespace's decay sum) when the memory was last put into a
    # decaying index: decay() ticks before that do not apply to it.
    placed_at_decay: float = 0.0
    # ln of the decay ticks it took before that, since its last access: kept
    # while it is whitelisted or cold (no score rises without an access).
    ticks: float = 0.0
    # Where the scripts keep it: still in `fresh` / `prot` until a script that
    # expires protection runs at or after protected_until.
    in_fresh: bool = False
    in_prot: bool = False
    prot_key: float = 0.0  # its score in `prot` while in_prot
    cold_since: int = 0  # when it entered the cold tier: the cold tier's LRU order
    cold_order: int = 0  # and the order of entry: the same ms leaves lowest score first
    tokens: int = 1  # its cost in the token budget (docs/rules.md, rule 10)
    group: str | None = None  # linked memories (docs/rules.md, rule 11)
    order: int = 0  # the remember that first made it: the window's order (rule 12)


def protected_newest(policy: Policy) -> int:
    """How many of the newest memories are protected by activity: protect_memories, at
    most a tenth of max_hot (docs/rules.md, rule 5)."""
    return min(policy.protect_memories, policy.max_hot // 10)


def jitter_offset(n: int, scale: float) -> float:
    """Tie-breaking offset for the n-th remember of a namespace (docs/rules.md, rule 4)."""
    h = (n * _FIBONACCI) % _TWO_32
    return scale * (h + 0.5) / _TWO_32


def ranked(items: Iterable[Mem], key: Callable[[Mem], float]) -> list[Mem]:
    """Items by key ascending, ties by id (a sorted set orders equal scores by member bytes)."""
    return sorted(items, key=lambda m: (key(m), m.id.encode()))


def lowest(items: Iterable[Mem], n: int, key: Callable[[Mem], float]) -> list[Mem]:
    """The n lowest by key; raises NearTie if a near-tie decides which or in what order."""
    order = ranked(items, key)
    decisive = order[: n + 1]
    for a, b in itertools.pairwise(decisive):
        if key(b) - key(a) < NEAR_TIE:
            raise NearTie(f"{a.id} and {b.id}")
    return order[:n]


@dataclass(frozen=True)
class Era:
    """A stretch of the namespace's history under one clock and half-life:
    from (ms, seq), the wall time and count of remembers where it began."""

    clock: str
    half_life: float  # in ms (wall) or remembers (activity)
    ms: int
    seq: int


def era(policy: Policy, ms: int, seq: int) -> Era:
    if policy.clock == "wall":
        return Era("wall", policy.half_life_s * 1000, ms, seq)
    return Era("activity", policy.half_life_memories, ms, seq)


class Model:
    """One namespace: its policy, clock state (decay sum D, jitter counter) and memories."""

    def __init__(self, policy: Policy, epoch: int) -> None:
        self.policy = policy
        self.epoch = epoch
        self.decay_sum = 0.0  # D: running sum of ln(rate) over decay() calls
        self.seq = 0  # remembers so far: the jitter counter and the activity clock
        self.memories: dict[str, Mem] = {}
        self.eras = [era(policy, epoch, 0)]  # one more per set_policy
        self.latest = 0  # the latest now a write used: the namespace's time
        self.evictions = 0  # memories evicted so far: the cold tier's order
        # The order at and below which no memory is protected by activity, as the
        # current call leaves the order counter (see _expire_protection).
        self.newest = -protected_newest(policy)

    def clock(self, now: int) -> int:
        """The now a call runs at: never before the namespace's latest."""
        return max(now, self.latest)

    def _write_at(self, now: int) -> int:
        """A call that moves memories: its now becomes the namespace's latest."""
        self.latest = self.clock(now)
        return self.latest

    # Scores

    def _ln_recency(self, m: Mem, now: int) -> float:
        """-ln 2 times the half-lives elapsed since the last access, era by
        era, each counted on its own clock (docs/rules.md, rule 1)."""
        half_lives = 0.0
        ends = [*self.eras[1:], Era("", 0, now, self.seq)]
        for i, (e, end) in enumerate(zip(self.eras, ends, strict=True)):
            if e.clock == "wall":
                # the first era also covers the time before the store was made
                start = e.ms if i else -math.inf
                span = min(now, end.ms) - max(m.last_access, start)
            else:
                span = min(self.seq, end.seq) - max(m.last_seq, e.seq)
            half_lives += max(0, span) / e.half_life
        return -math.log(2) * half_lives

    def ln_score(self, m: Mem, now: int) -> float:
        """ln of the unfloored score: what eviction and top() rank by."""
        if m.cold:  # keeps decaying with time; decay() ticks apply to hot memories only
            return math.log(m.importance + m.jitter) + self._ln_recency(m, now) + m.ticks
        if m.whitelisted:
            return math.log(m.importance * self.policy.whitelist_boost + m.jitter)
        ticks = m.ticks + self.decay_sum - m.placed_at_decay
        return math.log(m.importance + m.jitter) + self._ln_recency(m, now) + ticks

    def score(self, m: Mem, now: int) -> float:
        """The reported score: floored at score_min unless whitelisted."""
        s = math.exp(self.ln_score(m, now))
        return s if m.whitelisted else max(s, self.policy.score_min)

    def _whitelist_rank(self, m: Mem, now: int) -> float:
        """The score it would have if demoted (docs/rules.md, rule 7)."""
        return math.log(m.importance + m.jitter) + self._ln_recency(m, now) + m.ticks

    def _keep_ticks(self, m: Mem) -> None:
        """m leaves the decaying indexes without an access: it keeps its ticks."""
        m.ticks += self.decay_sum - m.placed_at_decay

    # The shared rules

    def hot(self) -> list[Mem]:
        return [m for m in self.memories.values() if not m.cold]

    def cold(self) -> list[Mem]:
        return [m for m in self.memories.values() if m.cold]

    def _protected(self, m: Mem, now: int) -> bool:
        """By time (protect_s) or by activity: fewer than protect_memories
        memories remembered after its first remember, and it costs at most
        max_tokens / (2 x the memories so protected), if there is a token budget
        (docs/rules.md, rule 5)."""
        n = protected_newest(self.policy)
        held = self.policy.max_tokens == 0 or n == 0 or m.tokens * 2 * n <= self.policy.max_tokens
        return m.protected_until > now or (m.order > self.newest and held)

    def _protect(self, m: Mem, now: int) -> None:
        """m is protected: in `prot`, ranked by its time while that lies ahead."""
        m.in_fresh = not m.whitelisted
        m.in_prot = True
        m.prot_key = m.protected_until if m.protected_until > now else ACTIVITY + m.order

    def _place(self, m: Mem, now: int) -> None:
        """Puts a memory into the hot tier; decay ticks count from here."""
        m.cold = False
        m.in_fresh = m.in_prot = False
        if self._protected(m, now):
            self._protect(m, now)
        if not m.whitelisted:
            m.placed_at_decay = self.decay_sum

    def _use(self, m: Mem, now: int) -> None:
        """Age 0 from now, on either clock."""
        m.last_access = now
        m.last_seq = self.seq
        m.ticks = 0.0

    def _refresh(self, m: Mem, now: int) -> None:
        """As fresh as a new memory: age 0 and protected for protect_s."""
        self._use(m, now)
        m.protected_until = max(m.protected_until, now + round(self.policy.protect_s * 1000))

    def _ran_out(self, m: Mem, now: int) -> bool:
        """Its entry in `prot` is in a range that ran out (by time or by activity)."""
        return m.in_prot and (m.prot_key <= now or ACTIVITY <= m.prot_key <= ACTIVITY + self.newest)

    def _expire_protection(
        self, now: int, remembers: int = 0, policy_changed: bool = False
    ) -> None:
        """The start of a call that moves memories and remembers `remembers`; after a
        policy change, a memory held by activity over its share of max_tokens too."""
        self.newest = self.seq + remembers - protected_newest(self.policy)
        for m in self.hot():
            by_activity = m.in_prot and m.prot_key > ACTIVITY + self.newest
            if self._ran_out(m, now) or (policy_changed and by_activity):
                if self._protected(m, now):  # still, the other way
                    self._protect(m, now)
                else:
                    m.in_prot = m.in_fresh = False

    def _evictable(self) -> list[Mem]:
        return [m for m in self.hot() if not m.whitelisted and not m.in_fresh]

    def members(self, m: Mem) -> list[Mem]:
        """m's group (m alone if it is in none)."""
        if m.group is None:
            return [m]
        return [x for x in self.memories.values() if x.group == m.group]

    def units(self) -> list[list[Mem]]:
        """What eviction can take: each evictable memory in no group, and each
        group whose members are all evictable (docs/rules.md, rule 11)."""
        evictable = {m.id for m in self._evictable()}
        out: list[list[Mem]] = []
        seen: set[str] = set()
        for m in self._evictable():
            if m.group is None:
                out.append([m])
            elif m.group not in seen:
                seen.add(m.group)
                group = self.members(m)
                if all(x.id in evictable for x in group):
                    out.append(group)
        return out

    def tokens(self) -> int:
        return sum(m.tokens for m in self.hot())

    def _over(self) -> int:
        return max(0, len(self.hot()) - self.policy.max_hot)

    def _over_tokens(self) -> int:
        if not self.policy.max_tokens:
            return 0
        return max(0, self.tokens() - self.policy.max_tokens)

    def _enforce(self, now: int) -> tuple[tuple[str, ...], int]:
        """Hot tier over max_hot or max_tokens: the lowest-ranked units (a
        group at its highest member's score) go cold until both hold, then
        evict_batch memories more."""

        def over() -> bool:
            return self._over() > 0 or self._over_tokens() > 0

        if not over():
            return (), 0
        rank = {u[0].id: max(self.ln_score(x, now) for x in u) for u in self.units()}
        units = ranked((u[0] for u in self.units()), lambda m: rank[m.id])
        gone: list[Mem] = []
        extra = self.policy.evict_batch
        for i, first in enumerate(units):
            holding = not over()
            if holding and extra <= 0:
                break
            if i + 1 < len(units) and rank[units[i + 1].id] - rank[first.id] < NEAR_TIE:
                raise NearTie(f"{first.id} and {units[i + 1].id}")
            held = [m for m in self.members(first) if self._protected(m, now)]
            if held:  # protected after all (a raised protect_memories): back, not evicted
                for m in held:
                    self._protect(m, now)
                continue
            group = sorted(self.members(first), key=lambda m: self.ln_score(m, now))
            for m in group:  # lowest first
                self._keep_ticks(m)
                m.cold = True
                m.in_fresh = m.in_prot = False
                m.cold_since = now
                self.evictions += 1
                m.cold_order = self.evictions
                gone.append(m)
            if holding:
                extra -= len(group)
        self._trim_cold()
        return tuple(m.id for m in gone), self._over()

    def _trim_cold(self) -> None:
        """The cold tier keeps its cold_max most recently evicted memories; a
        memory dropped takes the cold rest of its group along."""
        order = self.cold_order()
        for m in order[: max(0, len(order) - self.policy.cold_max)]:
            for x in self.members(m):
                if x.cold:
                    self.memories.pop(x.id, None)

    def cold_order(self) -> list[Mem]:
        """Cold memories, least recently evicted first (the first to go)."""
        return sorted(self.cold(), key=lambda m: m.cold_order)

    def _cap_whitelist(self, now: int) -> tuple[str, ...]:
        """Past whitelist_cap the lowest by importance x recency become ordinary."""
        whitelisted = [m for m in self.hot() if m.whitelisted]
        excess = len(whitelisted) - self.policy.whitelist_cap
        if excess <= 0:
            return ()
        demoted = lowest(whitelisted, excess, lambda m: self._whitelist_rank(m, now))
        for m in demoted:
            m.whitelisted = False
            self._place(m, now)
        return tuple(m.id for m in demoted)

    def _known(self, id: str) -> Mem:
        m = self.memories.get(id)
        if m is None:
            raise Unknown(id)
        return m

    # Operations, one per script, with the store's return values

    def _bring_group(self, m: Mem, now: int) -> None:
        """m came into the hot tier: the cold rest of its group comes too."""
        for x in self.members(m):
            if x.cold:
                self._refresh(x, now)
                self._place(x, now)

    def remember(
        self,
        id: str,
        importance: float,
        text: str | None,
        whitelist: bool,
        now: int,
        tokens: int = 1,
        group: str | None = None,
    ) -> Remembered:
        if self.policy.max_tokens and tokens > self.policy.max_tokens:
            raise TooCostly(id)
        now = self._write_at(now)
        self._expire_protection(now, remembers=1)
        self.seq += 1
        m = self.memories.get(id)
        if m is None:
            m = Mem(id, importance, 0.0, created=now, last_access=now, protected_until=now)
            m.order = self.seq
            self.memories[id] = m
        m.importance = importance
        m.tokens = tokens
        if group is not None:
            m.group = group
        m.jitter = jitter_offset(self.seq, self.policy.jitter)
        m.whitelisted = m.whitelisted or whitelist
        if text is not None:
            m.text = text
        self._refresh(m, now)
        self._place(m, now)
        self._bring_group(m, now)
        demoted = self._cap_whitelist(now) if whitelist else ()
        score = self.score(m, now)
        evicted, over = self._enforce(now)
        return Remembered(id, score, evicted, demoted, over, self._over_tokens())

    def touch(self, id: str, now: int) -> Remembered | None:
        m = self._known(id)
        if m.cold:
            return None
        now = self._write_at(now)
        self._expire_protection(now)
        self._use(m, now)  # protection and jitter unchanged
        self._place(m, now)
        score = self.score(m, now)
        evicted, over = self._enforce(now)
        return Remembered(id, score, evicted, (), over, self._over_tokens())

    def decay(self, rate: float) -> None:
        self.decay_sum += math.log(rate)

    def evict(self, now: int) -> Evicted:
        now = self._write_at(now)
        self._expire_protection(now)
        demoted = self._cap_whitelist(now)
        evicted, over = self._enforce(now)
        return Evicted(evicted, demoted, over, self.stats(now).backlog, self._over_tokens())

    def whitelist(self, id: str, now: int) -> Remembered:
        m = self._known(id)
        now = self._write_at(now)
        self._expire_protection(now)
        was_cold = m.cold
        if m.cold:  # recalled first
            self._refresh(m, now)
        elif not m.whitelisted:
            self._keep_ticks(m)
        m.whitelisted = True
        self._place(m, now)
        if was_cold:
            self._bring_group(m, now)
        demoted = self._cap_whitelist(now)
        score = self.score(m, now)
        evicted, over = self._enforce(now)
        return Remembered(id, score, evicted, demoted, over, self._over_tokens())

    def demote(self, id: str, now: int) -> Remembered:
        m = self._known(id)
        if not m.whitelisted:  # left alone: nothing changes, nothing is evicted
            return Remembered(
                id, self.score(m, self.clock(now)), (), (), self._over(), self._over_tokens()
            )
        now = self._write_at(now)
        self._expire_protection(now)
        m.whitelisted = False
        self._place(m, now)
        score = self.score(m, now)
        evicted, over = self._enforce(now)
        return Remembered(id, score, evicted, (id,), over, self._over_tokens())

    def recall(self, id: str, now: int) -> Remembered:
        m = self._known(id)
        now = self._write_at(now)
        self._expire_protection(now)
        self._refresh(m, now)
        self._place(m, now)
        self._bring_group(m, now)
        score = self.score(m, now)
        evicted, over = self._enforce(now)
        return Remembered(id, score, evicted, (), over, self._over_tokens())

    def forget(self, id: str) -> None:
        for m in self.members(self._known(id)):  # with its group
            del self.memories[m.id]

    def set_policy(self, policy: Policy, now: int) -> None:
        """A new policy from now: a new era of the clock, then the lower caps
        applied at once (whitelist_cap demotes, max_hot evicts)."""
        self.policy = policy
        now = self._write_at(now)
        self.eras.append(era(policy, now, self.seq))
        self._expire_protection(now, policy_changed=True)
        self._cap_whitelist(now)
        self._enforce(now)

    # Read-only views

    def get(self, id: str, now: int) -> Memory | None:
        m = self.memories.get(id)
        if m is None:
            return None
        now = self.clock(now)
        return Memory(
            id=m.id,
            importance=m.importance,
            score=self.score(m, now),
            tier="cold" if m.cold else "hot",
            whitelisted=m.whitelisted,
            protected_until=m.protected_until,
            created=m.created,
            last_access=m.last_access,
            text=m.text,
            tokens=m.tokens,
            group=m.group,
        )

    def top_groups(self, now: int) -> list[list[str]]:
        """Every hot memory's id, highest score first, as runs of near-tied ids.

        Within a run the store may use any order; runs are in order.
        """
        now = self.clock(now)

        def rank(m: Mem) -> tuple[float, float]:
            # the reported score first (docs/rules.md, rule 3), then the unfloored one
            return (math.log(max(self.score(m, now), 1e-300)), self.ln_score(m, now))

        order = sorted(self.hot(), key=lambda m: (*(-x for x in rank(m)), m.id.encode()))
        groups: list[list[str]] = []
        previous = (math.inf, math.inf)
        for m in order:
            here = rank(m)
            if all(p - h < NEAR_TIE for p, h in zip(previous, here, strict=True)):
                groups[-1].append(m.id)
            else:
                groups.append([m.id])
            previous = here
        return groups

    def stats(self, now: int) -> Stats:
        now = self.clock(now)
        hot = self.hot()
        return Stats(
            hot=len(hot),
            cold=len(self.memories) - len(hot),
            whitelisted=sum(m.whitelisted for m in hot),
            # (as `prot` ranks them: one whose time ran out counts again once a
            # call ranks it by its order)
            protected=sum(m.in_prot and not self._ran_out(m, now) for m in hot),
            over=self._over(),
            # The model's stores are far smaller than a call's work budget, so
            # the only work left to later calls is protection that ran out
            # since the last call that moved memories.
            backlog=sum(self._ran_out(m, now) for m in hot) + self._due(),
            tokens=self.tokens(),
            over_tokens=self._over_tokens(),
        )

    def _due(self) -> int:
        """Evictions still due (docs/python-api.md: stats): at least one per budget
        exceeded while something is evictable, a group counting once. A call
        leaves some only when protection ran out after it."""
        units = len(self.units())
        if not units:
            return 0
        return max(min(self._over(), units), 1 if self._over_tokens() else 0)

    def window(self, tokens: int | None, now: int) -> list[str]:
        """The window's ids in the order first remembered (docs/rules.md, rule 12):
        candidates by reported score, a group taken whole at its first
        (highest) member if it fits, any that does not fit skipped."""
        now = self.clock(now)
        left = math.inf if tokens is None else tokens
        order = [m for run in self.top_groups(now) for m in run]
        if tokens is not None:
            for run in self.top_groups(now):
                if len(run) > 1:
                    raise NearTie(" and ".join(run))
        chosen: list[Mem] = []
        decided: set[str] = set()
        for memory_id in order:
            m = self.memories[memory_id]
            if left <= 0:
                break
            if m.group is None:
                if m.tokens <= left:
                    chosen.append(m)
                    left -= m.tokens
            elif m.group not in decided:
                decided.add(m.group)
                group = [x for x in self.members(m) if not x.cold]
                cost = sum(x.tokens for x in group)
                if cost <= left:
                    chosen += group
                    left -= cost
        return [m.id for m in sorted(chosen, key=lambda m: (m.order, m.created, m.id))]
