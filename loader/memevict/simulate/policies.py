"""The policies a transcript is replayed through, each in its own namespace
on the same server: FIFO, LRU and memevict (one per --grid combination).

FIFO and LRU keep their window in one sorted set, ``memevict:{NS}:window``,
and evict its lowest members when it holds more than the window:

- FIFO scores a memory by its insertion sequence; re-remembering an id that
  is still in the window does not move it, one that was evicted comes back
  as newly inserted.
- LRU scores a memory by the sequence of its last remember or touch.

Neither knows importance or whitelists: demote and whitelist change nothing
for them, forget removes the memory.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, cast

import redis

from memevict.commands import check_namespace
from memevict.errors import NotFound
from memevict.log import MAX_COUNT as MAX_LOG
from memevict.policy import Policy
from memevict.results import Eviction
from memevict.scripts import key_name, namespace_keys
from memevict.simulate.transcript import Action, MemoryTurn
from memevict.store import MemoryStore

WINDOW_ROLE = "window"
# Fields a --grid may vary: the window (max_hot) is the same for every policy.
GRID_FIELDS = tuple(f.name for f in dataclasses.fields(Policy) if f.name != "max_hot")


class Runner(Protocol):
    """One policy replaying a transcript. Every method that changes the
    window returns the ids it evicted."""

    def remember(self, turn: MemoryTurn) -> tuple[str, ...]: ...

    def act(self, action: Action) -> tuple[str, ...]: ...

    def holds(self, memory_id: str, now: int) -> bool:
        """Whether the memory is there without a recall from a cold tier."""
        ...

    def window(self, now: int) -> list[str]:
        """The ids the agent sees: at most the window size."""
        ...


def clear(client: redis.Redis, namespace: str) -> None:
    """Deletes every key of the namespace: memevict's, the window of FIFO and
    LRU, and the receipts of memevict's writes (by SCAN)."""
    check_namespace(namespace)  # no glob characters: the pattern matches this namespace only
    receipts = client.scan_iter(match=key_name(namespace, "call:*"), count=1000)
    client.delete(*namespace_keys(namespace), key_name(namespace, WINDOW_ROLE), *receipts)


class _SortedSetWindow:
    def __init__(self, client: redis.Redis, namespace: str, size: int) -> None:
        self.client = client
        self.key = key_name(namespace, WINDOW_ROLE)
        self.size = size
        self.sequence = 0

    def _next(self) -> int:
        self.sequence += 1
        return self.sequence

    def _trim(self) -> tuple[str, ...]:
        over = int(self.client.zcard(self.key)) - self.size
        if over <= 0:
            return ()
        popped = cast(list[tuple[bytes, float]], self.client.zpopmin(self.key, over))
        return tuple(_text(member) for member, _ in popped)

    def act(self, action: Action) -> tuple[str, ...]:
        if action.action == "forget":
            self.client.zrem(self.key, action.id)
        return ()

    def holds(self, memory_id: str, now: int) -> bool:
        return self.client.zscore(self.key, memory_id) is not None

    def window(self, now: int) -> list[str]:
        return [_text(m) for m in cast(list[bytes], self.client.zrange(self.key, 0, -1))]


class FifoRunner(_SortedSetWindow):
    """First in, first out: evicts the oldest inserted."""

    def remember(self, turn: MemoryTurn) -> tuple[str, ...]:
        self.client.zadd(self.key, {turn.id: self._next()}, nx=True)
        return self._trim()


class LruRunner(_SortedSetWindow):
    """Least recently used: evicts the least recently remembered or touched."""

    def remember(self, turn: MemoryTurn) -> tuple[str, ...]:
        self.client.zadd(self.key, {turn.id: self._next()})
        return self._trim()

    def act(self, action: Action) -> tuple[str, ...]:
        if action.action == "touch":
            self.client.zadd(self.key, {action.id: self._next()}, xx=True)
            return ()
        return super().act(action)


class MemevictRunner:
    """memevict with a policy, every call at the transcript's time. ``tokens_of``: each
    memory's cost in the policy's max_tokens, of its text (None: 1 each); a memory over
    max_tokens costs max_tokens (as an adapter stores one)."""

    def __init__(
        self,
        client: redis.Redis,
        namespace: str,
        policy: Policy,
        tokens_of: Callable[[str], int] | None = None,
    ) -> None:
        self.store = MemoryStore(client, namespace, policy, replace_policy=True)
        self.size = policy.max_hot
        self.tokens_of = tokens_of
        self._since = "0-0"  # the eviction log read so far (left)

    def _tokens(self, text: str | None) -> int:
        if self.tokens_of is None:
            return 1
        tokens = max(1, self.tokens_of(text or ""))
        limit = self.store.policy.max_tokens
        return min(tokens, limit) if limit else tokens

    def remember(self, turn: MemoryTurn) -> tuple[str, ...]:
        if turn.importance is None:
            raise ValueError(f"memory {turn.id!r} has no importance: label the transcript first")
        r = self.store.remember(
            turn.id,
            turn.importance,
            text=turn.text,
            whitelist=turn.whitelist,
            tokens=self._tokens(turn.text),
            now=turn.at,
        )
        return r.evicted

    def act(self, action: Action) -> tuple[str, ...]:
        store, memory_id, now = self.store, action.id, action.at
        try:
            if action.action == "forget":
                store.forget(memory_id)
                return ()
            if action.action == "touch":
                touched = store.touch(memory_id, now=now)
                return touched.evicted if touched is not None else ()
            if action.action == "demote":
                return store.demote(memory_id, now=now).evicted
            return store.whitelist(memory_id, now=now).evicted
        except NotFound:  # dropped from the cold tier for good (cold_max)
            return ()

    def left(self) -> list[Eviction]:
        """What left a tier since the last call, from the namespace's eviction log (a
        policy with log_max; empty without)."""
        found: list[Eviction] = []
        while page := self.store.evictions(since=self._since, count=MAX_LOG):
            found += page
            self._since = page[-1].log_id
        return found

    def holds(self, memory_id: str, now: int) -> bool:
        memory = self.store.get(memory_id, now=now)
        return memory is not None and memory.tier == "hot"

    def window(self, now: int) -> list[str]:
        return [m.id for m in self.store.top(self.size, now=now)]


GridValue = int | float | str


def memevict_policies(
    window: int, fields: Mapping[str, GridValue], grid: Sequence[str]
) -> dict[str, Policy]:
    """The memevict policies to run, by report key: ``memevict`` alone, or one
    per combination of the --grid values (``memevict half_life_s=600 clock=wall``).

    ``fields`` are the Policy fields the user set; the rest keep the core's
    defaults, and max_hot is the window. Raises ValueError on a bad --grid.
    """
    base = Policy(max_hot=window, **fields)  # type: ignore[arg-type]
    axes = [_grid_axis(spec) for spec in grid]
    names = [name for name, _ in axes]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"--grid {name} given more than once")
        if name in fields:
            raise ValueError(f"{name} is both an option and a --grid field")
    if not axes:
        return {"memevict": base}
    policies: dict[str, Policy] = {}
    for values in itertools.product(*(vs for _, vs in axes)):
        changes = dict(zip(names, values, strict=True))
        label = " ".join(f"{name}={_shown(value)}" for name, value in changes.items())
        policies[f"memevict {label}"] = dataclasses.replace(base, **changes)  # type: ignore[arg-type]
    return policies


def grid_of(key: str, policy: Policy) -> dict[str, GridValue]:
    """The fields a report key of memevict_policies names (``memevict
    half_life_s=600 clock=wall``), with the policy's typed values."""
    named = (part.partition("=")[0] for part in key.split()[1:] if "=" in part)
    return {name: getattr(policy, name) for name in named if name in GRID_FIELDS}


def field_kind(name: str) -> type[int] | type[float] | type[str]:
    """The type of a Policy field's values."""
    kind = Policy.__dataclass_fields__[name].type
    return int if kind == "int" else str if kind == "str" else float


def _shown(value: GridValue) -> str:
    return value if isinstance(value, str) else f"{value:g}"


def _grid_axis(spec: str) -> tuple[str, list[GridValue]]:
    name, _, listed = spec.partition("=")
    name = name.strip().replace("-", "_")
    if name == "max_hot":
        raise ValueError("max_hot is the window of every policy: use --window")
    if name not in GRID_FIELDS:
        raise ValueError(f"--grid {spec!r}: FIELD must be one of {', '.join(GRID_FIELDS)}")
    kind = field_kind(name)
    values: list[GridValue] = []
    for raw in listed.split(","):
        value: GridValue
        if kind is str:
            value = raw.strip()
            if not value or any(c.isspace() or c == "=" for c in value):
                raise ValueError(f"--grid {spec!r}: values must be words, got {raw!r}")
        else:
            try:
                value = kind(raw)
            except ValueError:
                what = "whole numbers" if kind is int else "numbers"
                raise ValueError(f"--grid {spec!r}: values must be {what}, got {raw!r}") from None
        if value in values:
            raise ValueError(f"--grid {spec!r}: {raw} is listed twice")
        values.append(value)
    return name, values


def hindsight_windows(
    said: Sequence[str], evidence: Sequence[Sequence[str]], size: int
) -> tuple[frozenset[str], frozenset[str]]:
    """Hindsight, the ceiling no policy can beat: windows of at most ``size``
    of the memories ``said`` (in the order first said), chosen knowing the
    questions' ``evidence``. Returns the window for "answerable" (greedy
    maximum coverage: the memory that answers most questions not answered
    yet, ties to the earliest said; within 1 - 1/e of the best, and the best
    when each question has one evidence turn) and the window for "all
    evidence" (greedy: the question whose evidence needs the fewest memories
    not chosen yet, while they fit)."""
    order = {memory_id: i for i, memory_id in enumerate(said)}
    answers: dict[str, set[int]] = {}
    for q, ids in enumerate(evidence):
        for memory_id in ids:
            if memory_id in order:
                answers.setdefault(memory_id, set()).add(q)
    unanswered = set(range(len(evidence)))
    covering: list[str] = []
    while len(covering) < size and answers:
        best = max(answers, key=lambda m: (len(answers[m] & unanswered), -order[m]))
        if not answers[best] & unanswered:
            break
        covering.append(best)
        unanswered -= answers.pop(best)

    full: set[str] = set()
    whole = [q for q, ids in enumerate(evidence) if all(m in order for m in ids)]
    while whole:
        q = min(whole, key=lambda q: (len(set(evidence[q]) - full), q))
        needed = set(evidence[q]) - full
        if len(full) + len(needed) > size:
            break
        full |= needed
        whole.remove(q)
    return frozenset(covering), frozenset(full)


def _text(member: bytes | str) -> str:
    return member.decode("utf-8") if isinstance(member, bytes) else member
