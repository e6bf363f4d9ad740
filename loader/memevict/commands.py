"""Argument building and reply parsing for every script, shared by all stores.

Each function checks its arguments (for friendly errors; the scripts check
them again, for callers that bypass Python) and returns a :class:`Call`: the
script to run, its ARGV by name, and the parser for its reply. A store only
sends the call, so sync and async stores share every line of this.
"""

from __future__ import annotations

import dataclasses
import math
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from memevict.errors import (
    BadArgument,
    BadGroup,
    BadId,
    BadImportance,
    BadNamespace,
    BadNow,
    BadPolicy,
    BadRate,
    BadTerms,
    BadTokens,
    InvalidArgument,
)
from memevict.policy import Policy
from memevict.results import (
    Batch,
    Clock,
    Context,
    Evicted,
    Explanation,
    Match,
    Memory,
    Protection,
    Reason,
    Remembered,
    ScanPage,
    ScoreParts,
    Standing,
    Stats,
    Tier,
    Window,
    WindowFit,
)
from memevict.scripts import Args
from memevict.terms import CALL_TERMS, MAX_TERM_BYTES, MAX_TERMS, fitted, joined, query_terms
from memevict.terms import terms as terms_of

T = TypeVar("T")
POLICY_FIELDS = tuple(Policy.__dataclass_fields__)  # in configure's ARGV and reply order

MAX_ID_BYTES = 1024
MIN_NOW_MS = 946684800000  # 2000-01-01T00:00:00Z, as in lua/lib/args.lua
MAX_NOW_MS = 253402300799999  # 9999-12-31T23:59:59.999Z, as in lua/lib/args.lua
MAX_IMPORTANCE = 1e12  # as in lua/lib/args.lua
MAX_TOP = 200  # as in lua/top.lua
MAX_NAMESPACE_BYTES = 256
MAX_BATCH = 100  # items per remember_many, as in lua/remember_many.lua
MAX_SKIP = 100  # ids context leaves out, as in lua/context.lua
MAX_TOKENS = 1_000_000_000  # tokens of one memory, as in lua/lib/args.lua
MAX_GROUP_BYTES = 256  # as in lua/lib/args.lua
MAX_BUDGET = 2**53 - 1  # as in lua/window.lua
MAX_SCAN = 200  # metadata entries per scan page, as in lua/scan.lua


# A write's ``seen`` argument when it checks nothing: a store puts the namespace as it last
# saw it there ('<incarnation>:<revision>', lua/lib/policy.lua) when it sends the call.
UNSEEN = b""
# configure's seen when it checks nothing but is to tell the namespace's seen (its reply
# then ends with it).
ASK_SEEN = "?"


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One script call: which script, its arguments by name, how to read its
    reply, and (for a write) the call id that names its receipt key."""

    script: str
    args: Args
    parse: Callable[[Any], T]
    call: str = ""


# Braces would break the {namespace} hash tag; glob characters would widen an
# ACL key pattern such as ~memevict:{namespace}:* to other namespaces.
_NAMESPACE_FORBIDDEN = frozenset("{}*?[]\\")


def check_namespace(namespace: str) -> str:
    if not isinstance(namespace, str) or not namespace:
        raise BadNamespace("namespace must be a non-empty string")
    if any(c in _NAMESPACE_FORBIDDEN or not c.isprintable() or c.isspace() for c in namespace):
        raise BadNamespace(
            f"namespace must be printable, without spaces or any of {{ }} * ? [ ] \\: {namespace!r}"
        )
    if len(namespace.encode("utf-8")) > MAX_NAMESPACE_BYTES:
        raise BadNamespace(f"namespace must be at most {MAX_NAMESPACE_BYTES} bytes")
    return namespace


def _utf8(value: str, what: str, error: type[InvalidArgument]) -> bytes:
    # Strings are sent as UTF-8 bytes; values read back that are not UTF-8
    # arrive as str with surrogate escapes (see as_text) and go back as the same bytes.
    if not isinstance(value, str):
        raise error(f"{what} must be a str, got {type(value).__name__}")
    if value.isascii():  # (no surrogate escapes: nothing more to check)
        return value.encode()
    try:
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise error(f"{what} is not encodable as UTF-8: {value[:40]!r}") from None
    # Escapes of bytes that form valid UTF-8 would name the same bytes as
    # another string ('\udcc3\udcbf' and 'ÿ'): only the form read back is accepted.
    if raw.decode("utf-8", "surrogateescape") != value:
        raise error(f"{what} escapes bytes that are valid UTF-8: {value[:40]!r}")
    return raw


def _id(memory_id: str) -> bytes:
    raw = _utf8(memory_id, "id", BadId)
    if not 1 <= len(raw) <= MAX_ID_BYTES:
        raise BadId(f"id must be 1..{MAX_ID_BYTES} bytes, got {len(raw)}")
    return raw


def _text(value: str) -> bytes:
    return _utf8(value, "text", BadArgument)


def _tokens(tokens: int) -> bytes:
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= MAX_TOKENS:
        raise BadTokens(f"tokens must be a whole number in [1, {MAX_TOKENS}], got {tokens!r}")
    return b"%d" % tokens


def _group(group: str | None) -> bytes:
    """None keeps the memory's group (none for a new memory)."""
    if group is None:
        return b""
    raw = _utf8(group, "group", BadGroup)
    if not 1 <= len(raw) <= MAX_GROUP_BYTES or b"\0" in raw:
        raise BadGroup(f"group must be 1..{MAX_GROUP_BYTES} bytes without a NUL: {group[:40]!r}")
    return raw


def _terms(found: Sequence[str] | None, text: str | None) -> bytes | list[str]:
    """The terms of a memory as the scripts take them: those of its text
    (memevict.terms: a list, to be joined) unless given; none without text."""
    if text is None:
        if found:
            raise BadTerms("terms index a text: give text with them")
        return b""
    if found is None:
        return terms_of(text)
    return _checked_terms(found, MAX_TERMS, "terms")


def _call_terms(values: list[bytes | list[str]]) -> list[bytes]:
    """The terms of one call's memories, joined: the terms made from texts cut to what
    the given ones leave of CALL_TERMS (memevict.terms.fitted); BadTerms if the given ones
    alone are more."""
    given = sum(v.count(b" ") + 1 for v in values if isinstance(v, bytes) and v)
    if given > CALL_TERMS:
        raise BadTerms(
            f"a call indexes at most {CALL_TERMS} terms, its memories' together; "
            f"the items give {given}"
        )
    made = iter(fitted([v for v in values if isinstance(v, list)], CALL_TERMS - given))
    return [v if isinstance(v, bytes) else joined(next(made)) for v in values]


def _checked_terms(found: Sequence[str], most: int, name: str) -> bytes:
    if isinstance(found, str | bytes) or not isinstance(found, Sequence):
        raise BadTerms(f"{name} must be a sequence of str, got {type(found).__name__}")
    distinct = set()
    for term in found:
        raw = _utf8(term, "a term", BadTerms) if isinstance(term, str) else None
        if raw is None or not 1 <= len(raw) <= MAX_TERM_BYTES or b" " in raw or b"\0" in raw:
            raise BadTerms(
                f"a term is a str of 1..{MAX_TERM_BYTES} bytes without a space or a NUL: {term!r}"
            )
        distinct.add(term)
    if len(distinct) > most:
        raise BadTerms(f"{name} holds at most {most} distinct terms, got {len(distinct)}")
    return joined(list(dict.fromkeys(found)))  # (each once: the scripts cap the bytes)


MAX_CALL_ID = 64
_CALL_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def _call(call_id: str | None = None) -> str:
    """The call's id (a fresh one unless given): the script keeps its reply under it
    (the receipt), so the call sent again with the same id runs once."""
    if call_id is None:
        return secrets.token_hex(8)
    if not isinstance(call_id, str) or not _CALL_ID.fullmatch(call_id):
        raise BadArgument(
            f"call_id must be 1..{MAX_CALL_ID} characters of A-Z a-z 0-9 . _ : -, "
            f"got {call_id!r:.80}"
        )
    return call_id


def finite_number(value: object) -> float | None:
    """value as a float if it is a finite int or float (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        x = float(value)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None


def _importance(importance: float) -> bytes:
    x = finite_number(importance)
    if x is None or not 0 < x <= MAX_IMPORTANCE:
        raise BadImportance(f"importance must be a number in (0, 1e12], got {importance!r}")
    return repr(x).encode()


def _below(x: object, bound: int) -> bool:
    return isinstance(x, int) and x < bound


def _now(now: int | None) -> bytes:
    if now is None:
        return b""
    if isinstance(now, bool) or not isinstance(now, int) or not MIN_NOW_MS <= now <= MAX_NOW_MS:
        raise BadNow(
            f"now must be whole milliseconds since the Unix epoch in [{MIN_NOW_MS} (2000-01-01), "
            f"{MAX_NOW_MS}], got {now!r}"
            + (" (a time in seconds is 1000 times too small)" if _below(now, MIN_NOW_MS) else "")
        )
    return b"%d" % now


def as_text(value: str | bytes) -> str:
    """A reply value as str; bytes that are not UTF-8 become surrogate escapes."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def _texts(values: Sequence[Any]) -> list[Any]:
    """:func:`as_text` of each value (None stays None); a list of bytes, the usual reply,
    decoded in one comprehension (~half the time of a call per value)."""
    try:
        return [value.decode("utf-8", "surrogateescape") for value in values]
    except AttributeError:  # (str from a client that decodes, or None)
        return [None if value is None else as_text(value) for value in values]


def _memory(reply: Sequence[Any]) -> Memory:
    id_, importance, score, tier, whitelisted, until, created, last, text, tokens, group = reply
    return Memory(
        id=as_text(id_),
        importance=float(importance),
        score=float(score),
        tier=cast(Tier, as_text(tier)),
        whitelisted=bool(whitelisted),
        protected_until=int(until),
        created=int(created),
        last_access=int(last),
        text=None if text is None else as_text(text),
        tokens=int(tokens),
        group=as_text(group) or None,
    )


def _ids(reply: Sequence[Any]) -> tuple[str, ...]:
    return tuple(as_text(x) for x in reply)


def _remembered(memory_id: str) -> Callable[[Any], Remembered]:
    def parse(reply: Sequence[Any]) -> Remembered:
        score, evicted, demoted, over, over_tokens = reply
        return Remembered(
            memory_id, float(score), _ids(evicted), _ids(demoted), int(over), int(over_tokens)
        )

    return parse


def _remembered_or_none(memory_id: str) -> Callable[[Any], Remembered | None]:
    parse = _remembered(memory_id)
    return lambda reply: None if reply is None else parse(reply)


@dataclass(frozen=True, slots=True)
class Configured:
    """configure's reply: its status, the policy in force after it and (asked with a seen
    argument) the namespace's seen after it, '<incarnation>:<revision>' ("" not asked)."""

    status: str
    policy: Policy
    seen: str


def _configured(reply: Sequence[Any]) -> Configured:
    status, *values = (as_text(x) for x in reply)
    names = POLICY_FIELDS
    seen = values[len(names)] if len(values) > len(names) else ""
    stored = Policy.from_strings(dict(zip(names, values[: len(names)], strict=True)))
    return Configured(status, stored, seen)


def configured(policy: Policy, *, replace: bool, now: int | None = None) -> Call[Configured]:
    """configure with ``policy`` (stored if the namespace has none, or ``replace``); a
    store sends it with its seen (or ASK_SEEN), so the reply tells it the namespace's."""
    if not isinstance(policy, Policy):
        raise BadPolicy(f"policy must be a memevict.Policy, got {type(policy).__name__}")
    args = {
        "mode": "replace" if replace else "init",
        **policy.to_args(),
        "now": _now(now),
        "seen": UNSEEN,
    }
    return Call("configure", args, _configured)


def configure(policy: Policy, *, replace: bool, now: int | None = None) -> Call[tuple[str, Policy]]:
    """As configured, its reply read as (status, policy)."""
    call = configured(policy, replace=replace, now=now)

    def parse(reply: Sequence[Any]) -> tuple[str, Policy]:
        done = _configured(reply)
        return done.status, done.policy

    return Call(call.script, call.args, parse)


def update_policy(changes: Mapping[str, Any], *, now: int | None = None) -> Call[Configured]:
    """Changes only the given fields of the stored policy, in one atomic call (no
    read-modify-write race between two operators changing different fields)."""
    if not changes:
        raise BadPolicy("set_policy needs a Policy or at least one field to change")
    try:  # each value checked as Policy checks it, for a friendly error
        checked = dataclasses.replace(Policy(), **changes)
    except TypeError as error:
        raise BadPolicy(f"not a Policy field: {error}") from None
    values = checked.to_args()
    args: dict[str, str | bytes] = {
        "mode": "update",
        **{name: values[name] if name in changes else "" for name in values},
        "now": _now(now),
        "seen": UNSEEN,
    }
    return Call("configure", args, _configured)


def remember(
    memory_id: str,
    importance: float,
    *,
    text: str | None,
    whitelist: bool,
    now: int | None,
    tokens: int = 1,
    group: str | None = None,
    call_id: str | None = None,
    terms: Sequence[str] | None = None,
) -> Call[Remembered]:
    if not isinstance(whitelist, bool):
        raise BadArgument(f"whitelist must be a bool, got {whitelist!r}")
    args: dict[str, str | bytes] = {
        "id": _id(memory_id),
        "importance": _importance(importance),
        "text": b"" if text is None else _text(text),
        "has_text": b"0" if text is None else b"1",
        "whitelist": b"1" if whitelist else b"0",
        "tokens": _tokens(tokens),
        "group": _group(group),
        "now": _now(now),
        "seen": UNSEEN,
        "terms": _call_terms([_terms(terms, text)])[0],
    }
    return Call("remember", args, _remembered(memory_id), _call(call_id))


@dataclass(frozen=True, slots=True)
class Item:
    """One memory of a ``remember_many`` batch, with remember's arguments."""

    id: str
    importance: float
    text: str | None = None
    whitelist: bool = False
    tokens: int = 1
    group: str | None = None
    terms: Sequence[str] | None = None


def remember_many(
    items: Sequence[Item | tuple[str, float]],
    *,
    now: int | None,
    call_id: str | None = None,
    evicted_texts: bool = False,
) -> Call[Batch]:
    if not isinstance(evicted_texts, bool):
        raise BadArgument(f"evicted_texts must be a bool, got {evicted_texts!r}")
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise BadArgument("items must be a sequence of Item or (id, importance) pairs")
    if not 1 <= len(items) <= MAX_BATCH:
        raise BadArgument(f"remember_many takes 1..{MAX_BATCH} items, got {len(items)}")
    values: list[str | bytes] = []
    ids = []
    found_terms: list[bytes | list[str]] = []
    for item in items:
        if isinstance(item, Item):
            memory_id, importance, text = item.id, item.importance, item.text
            whitelist, tokens, group, found = item.whitelist, item.tokens, item.group, item.terms
        elif isinstance(item, tuple) and len(item) == 2:  # (Item's defaults)
            (memory_id, importance), text, whitelist, tokens, group = item, None, False, 1, None
            found = None
        else:
            raise BadArgument(f"each item must be an Item or an (id, importance) pair: {item!r}")
        if not isinstance(whitelist, bool):
            raise BadArgument(f"whitelist must be a bool, got {whitelist!r}")
        ids.append(memory_id)
        values += [
            _id(memory_id),
            _importance(importance),
            b"" if text is None else _text(text),
            b"0" if text is None else b"1",
            b"1" if whitelist else b"0",
            _tokens(tokens),
            _group(group),
            b"",  # (its terms, below)
        ]
        found_terms.append(_terms(found, text))
    values[7::8] = _call_terms(found_terms)

    def parse(reply: Sequence[Any]) -> Batch:
        scores, evicted, demoted, over, over_tokens, version, orders, moved, texts = reply
        return Batch(
            tuple(ids),
            tuple(float(s) for s in scores),
            _ids(evicted),
            _ids(demoted),
            int(over),
            int(over_tokens),
            int(version),
            tuple(int(n) for n in orders),
            _ids(moved),
            tuple(None if t is None else as_text(t) for t in texts),
        )

    texts = b"1" if evicted_texts else b"0"
    args: Args = {"now": _now(now), "seen": UNSEEN, "texts": texts, "items": values}
    return Call("remember_many", args, parse, _call(call_id))


def touch(
    memory_id: str, *, now: int | None, call_id: str | None = None
) -> Call[Remembered | None]:
    args: dict[str, str | bytes] = {"id": _id(memory_id), "now": _now(now), "seen": UNSEEN}
    return Call("touch", args, _remembered_or_none(memory_id), _call(call_id))


def decay(rate: float, *, call_id: str | None = None) -> Call[None]:
    x = finite_number(rate)
    if x is None or not 0 < x <= 1:
        raise BadRate(f"rate must be a number in (0, 1], got {rate!r}")
    return Call("decay", {"rate": repr(x), "seen": UNSEEN}, lambda _: None, _call(call_id))


def evict(*, now: int | None, call_id: str | None = None) -> Call[Evicted]:
    def parse(reply: Sequence[Any]) -> Evicted:
        evicted, demoted, over, backlog, over_tokens = reply
        return Evicted(_ids(evicted), _ids(demoted), int(over), int(backlog), int(over_tokens))

    return Call("evict", {"now": _now(now), "seen": UNSEEN}, parse, _call(call_id))


def _by_id(script: str, memory_id: str, now: int | None, call_id: str | None) -> Call[Remembered]:
    args: dict[str, str | bytes] = {"id": _id(memory_id), "now": _now(now), "seen": UNSEEN}
    return Call(script, args, _remembered(memory_id), _call(call_id))


def whitelist(memory_id: str, *, now: int | None, call_id: str | None = None) -> Call[Remembered]:
    return _by_id("whitelist", memory_id, now, call_id)


def demote(memory_id: str, *, now: int | None, call_id: str | None = None) -> Call[Remembered]:
    return _by_id("demote", memory_id, now, call_id)


def recall(memory_id: str, *, now: int | None, call_id: str | None = None) -> Call[Remembered]:
    return _by_id("recall", memory_id, now, call_id)


def forget(memory_id: str, *, call_id: str | None = None) -> Call[None]:
    args = {"id": _id(memory_id), "seen": UNSEEN}
    return Call("forget", args, lambda _: None, _call(call_id))


def get(memory_id: str, *, now: int | None) -> Call[Memory | None]:
    def parse(reply: Sequence[Any] | None) -> Memory | None:
        return None if reply is None else _memory(reply)

    return Call("get", {"id": _id(memory_id), "now": _now(now)}, parse)


def top(k: int, *, now: int | None) -> Call[list[Memory]]:
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_TOP:
        raise BadArgument(f"k must be a whole number in [0, {MAX_TOP}], got {k!r}")
    return Call("top", {"k": str(k), "now": _now(now)}, lambda r: [_memory(m) for m in r])


MAX_SEARCH = 100
TIERS = ("all", "hot", "cold")


def search(query: str, k: int, *, tier: str, now: int | None) -> Call[list[Match]]:
    """The memories that best match ``query`` (its terms: memevict.terms)."""
    if not isinstance(query, str):
        raise BadArgument(f"query must be a str, got {type(query).__name__}")
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_SEARCH:
        raise BadArgument(f"k must be a whole number in [0, {MAX_SEARCH}], got {k!r}")
    if tier not in TIERS:
        raise BadArgument(f"tier must be one of {', '.join(TIERS)}, got {tier!r}")
    _utf8(query, "query", BadArgument)

    def parse(reply: Sequence[Any]) -> list[Match]:
        return [Match(float(relevance), _memory(memory)) for relevance, memory in reply]

    args: dict[str, str | bytes] = {
        "terms": joined(query_terms(query)),
        "k": str(k),
        "tier": tier,
        "now": _now(now),
    }
    return Call("search", args, parse)


def stats(*, now: int | None) -> Call[Stats]:
    def parse(reply: Sequence[Any]) -> Stats:
        return Stats(*(int(x) for x in reply))

    return Call("stats", {"now": _now(now)}, parse)


def _budget(tokens: int | None) -> str:
    if tokens is None:
        return ""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= MAX_BUDGET:
        raise BadTokens(f"tokens must be None or a whole number in [1, 2**53), got {tokens!r}")
    return str(tokens)


def window(
    tokens: int | None, *, now: int | None, query: str | None = None, share: float | None = None
) -> Call[Window]:
    def parse(reply: Sequence[Any]) -> Window:
        memories, total, left, epoch, recalled = reply
        return Window(
            tuple(_memory(m) for m in memories),
            int(total),
            int(left),
            int(epoch),
            tuple(_texts(recalled)),
        )

    args: Args = {"budget": _budget(tokens), "now": _now(now)}
    return Call("window", {**args, **_query(tokens, query, share)}, parse)


def explain(memory_id: str, tokens: int | None, *, now: int | None) -> Call[Explanation]:
    """Why a memory ranks where it does (lua/explain.lua); with ``tokens``, its place in
    ``window(tokens)``. An unknown id is an Explanation of tier "absent"."""

    def parse(reply: Sequence[Any]) -> Explanation:
        found, tier, memory, parts, protection, rank, fit = reply
        if memory is None:
            return Explanation(as_text(found), "absent")
        imp, boost, jitter, recency, age, half_life, clock, decay, floored = parts
        return Explanation(
            as_text(found),
            cast(Standing, as_text(tier)),
            _memory(memory),
            ScoreParts(
                float(imp),
                float(boost),
                float(jitter),
                float(recency),
                float(age),
                float(half_life),
                cast(Clock, as_text(clock)),
                float(decay),
                bool(floored),
            ),
            Protection(*(bool(x) for x in protection[:3]), *(int(x) for x in protection[3:])),
            None if rank is None else int(rank),
            None if fit is None else _window_fit(fit),
        )

    args: dict[str, str | bytes] = {
        "id": _id(memory_id),
        "budget": _budget(tokens),
        "now": _now(now),
    }
    return Call("explain", args, parse)


def _window_fit(reply: Sequence[Any]) -> WindowFit:
    budget, included, reason, left, cost = reply
    why = as_text(reason)
    return WindowFit(
        int(budget), bool(included), cast(Reason, why) if why else None, int(left), int(cost)
    )


def recall_share(tokens: int) -> float:
    """The part of a ``tokens`` budget a query fills by default: about 1,000 tokens, at
    most half (0.5 at 2,000 tokens, 0.2 at 5,000, 0.1 at 10,000: the best shares
    measured on real conversations, issue 39)."""
    return min(0.5, 1000 / tokens)


def _query(tokens: int | None, query: str | None, share: float | None) -> Args:
    """A query's arguments (window, context): its terms and its share of ``tokens``
    (None: recall_share's)."""
    found = b""
    if query is not None:
        _utf8(query, "query", BadArgument)
        found = joined(query_terms(query))
    if share is None:
        share = recall_share(tokens) if query is not None and tokens else 0.0
    x = finite_number(share)
    if x is None or not 0 <= x <= 1:
        raise BadArgument(f"share must be a number in [0, 1], got {share!r}")
    return {"terms": found, "share": repr(x)}


def context(
    tokens: int | None,
    *,
    now: int | None,
    skip: Sequence[str] = (),
    query: str | None = None,
    share: float | None = None,
    detail: bool = False,
) -> Call[Context]:
    if isinstance(skip, str | bytes) or not isinstance(skip, Sequence):
        raise BadArgument("skip must be a sequence of ids")
    if len(skip) > MAX_SKIP:
        raise BadArgument(f"context skips at most {MAX_SKIP} ids, got {len(skip)}")
    if not isinstance(detail, bool):
        raise BadArgument(f"detail must be a bool, got {detail!r}")
    left_out = [_id(id) for id in skip]

    def parse(reply: Sequence[Any]) -> Context:
        ids, texts, total, left, epoch, recalled, version, sizes, orders = reply
        items = tuple(zip(_texts(ids), _texts(texts), strict=True))
        return Context(
            items,
            int(total),
            int(left),
            int(epoch),
            tuple(_texts(recalled)),
            int(version),
            tuple(int(n) for n in sizes),
            tuple(int(n) for n in orders),
        )

    args: Args = {"budget": _budget(tokens), "now": _now(now), **_query(tokens, query, share)}
    return Call("context", {**args, "detail": b"1" if detail else b"0", "skip": left_out}, parse)


def scan(tier: str, cursor: int, count: int, *, now: int | None) -> Call[ScanPage]:
    if tier not in ("hot", "cold"):
        raise BadArgument(f"tier must be 'hot' or 'cold', got {tier!r}")
    if isinstance(cursor, bool) or not isinstance(cursor, int) or not 0 <= cursor < 2**64:
        raise BadArgument(f"cursor must be 0 or a cursor a page returned, got {cursor!r}")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SCAN:
        raise BadArgument(f"count must be a whole number in [1, {MAX_SCAN}], got {count!r}")

    def parse(reply: Sequence[Any]) -> ScanPage:
        next_cursor, memories = reply
        return ScanPage(int(next_cursor), tuple(_memory(m) for m in memories))

    args: dict[str, str | bytes] = {
        "tier": tier,
        "cursor": str(cursor),
        "count": str(count),
        "now": _now(now),
    }
    return Call("scan", args, parse)


def drop() -> Call[int]:
    return Call("drop", {}, int)
