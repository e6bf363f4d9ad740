"""What every framework adapter shares: a conversation's items as memories.

An adapter turns each item of its framework (a message, a tool call, a tool result) into
an :class:`Entry`: a stable id, the item serialized as text, what the labeler reads, and
the group that links it to the items it must travel with (a tool call and its result).
:class:`Conversation` (and :class:`AsyncConversation`) remember new entries, with an
importance from a labeler and a token cost from a counter, in a namespace whose policy
keeps the hot tier within the token budget; the evicted stay in the cold tier, recallable.
The prompt is :meth:`Conversation.window`: the window (highest-ranked whole groups that fit,
in time order), with the current turn (``tail``) always in it.

Sync and async share everything but the store calls.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from memevict.aio import AsyncMemoryStore
from memevict.commands import MAX_BATCH, MAX_SKIP, Item, check_namespace
from memevict.errors import BadArgument, BadNamespace, NamespaceLost
from memevict.importance import Labeler, Message, rules
from memevict.labelers import aimportances_of, importances_of
from memevict.policy import Policy
from memevict.registry import AsyncClient, SyncClient
from memevict.results import Context, Memory
from memevict.store import MemoryStore

TokenCounter = Callable[[str], int]

log = logging.getLogger("memevict.integrations")

MAX_TOKENS = 8000  # the adapters' default budget
RECENT = 4  # the messages before the current turn sent whatever their rank, while they fit
# The hot tier is bounded by tokens; this only keeps a count bound out of the way.
MAX_HOT = 100_000
# Recency's half-life, in memories remembered in the conversation (see HISTORY.md:
# coverage on real conversations rises with it; the current turn is always sent).
HALF_LIFE_MEMORIES = 2000.0
# A user's message ranks this far below what answers it, at least (see _items): up to
# the answer's importance, the questions take budget the answers need (HISTORY.md).
ASKED_BELOW = 2.0
PIN_AT = 10.0  # the importance of an instruction (memevict.importance.CATEGORIES)
# An item over the whole budget is remembered at this importance, alone, so that it goes
# straight to the cold tier (recallable) without evicting anything else.
OVER_BUDGET_IMPORTANCE = 1e-6
_KNOWN = 10_000  # ids an adapter remembers having stored, per conversation


def approx_tokens(text: str) -> int:
    """About four characters per token, the usual rule of thumb for English text with
    OpenAI's and Anthropic's tokenizers; at least 1. Pass your tokenizer's count for
    exact budgets (``lambda text: len(encoding.encode(text))`` with tiktoken)."""
    return max(1, (len(text) + 3) // 4)


def namespace_for(framework: str, session_id: str) -> str:
    """The namespace of a session: ``<framework>:<session_id>``, or
    ``<framework>:sha256:<hex of the id>`` when that is not a namespace memevict takes
    (spaces, braces, ``*?[]\\``, unprintable characters, a namespace over 256 bytes)."""
    if not isinstance(session_id, str):
        raise BadArgument(f"session_id must be a string, got {session_id!r}")
    try:
        return check_namespace(f"{framework}:{session_id}")
    except BadNamespace:
        digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
        return f"{framework}:sha256:{digest}"


def conversation_policy(max_tokens: int, **changes: float | int | str) -> Policy:
    """The policy of an adapter's namespace: the hot tier (what the model sees) holds at
    most ``max_tokens`` tokens; a new memory is evictable at once (the adapter itself keeps
    the current turn in the prompt); recency on the activity clock (a conversation ages by
    its own messages, not by the wall clock). ``changes``: any other Policy field."""
    fields: dict[str, float | int | str] = {
        "max_hot": MAX_HOT,
        "max_tokens": max_tokens,
        "protect_s": 0.0,
        "clock": "activity",
        "half_life_memories": HALF_LIFE_MEMORIES,
    }
    fields.update(changes)
    return Policy(**fields)  # type: ignore[arg-type]


def check_one_of(what: str, url: str | None, client: object, store: object) -> None:
    """Raises BadArgument unless exactly one of url, client and store is given."""
    given = [n for n, v in (("url", url), ("client", client), ("store", store)) if v is not None]
    if len(given) != 1:
        raise BadArgument(f"give {what} one of url, client or store, got {given or 'none'}")


def open_store(
    what: str,
    namespace: str,
    policy: Policy,
    *,
    url: str | None,
    client: SyncClient | None,
    store: MemoryStore | None,
) -> MemoryStore:
    """An adapter's store: ``store`` as it is, or one on ``client`` or on a client of its
    own of ``url``, with ``policy`` if the namespace is new (the adapter then applies the
    fields it was given: see :meth:`Conversation.settle`)."""
    check_one_of(what, url, client, store)
    if store is not None:
        return store
    if client is not None:
        return MemoryStore(client, namespace, policy, adopt_policy=True)
    return MemoryStore.from_url(str(url), namespace, policy, adopt_policy=True)


def open_async_store(
    what: str,
    namespace: str,
    policy: Policy,
    *,
    url: str | None,
    client: AsyncClient | None,
    store: AsyncMemoryStore | None,
) -> AsyncMemoryStore:
    """:func:`open_store` for an :class:`~memevict.aio.AsyncMemoryStore` (opened on its
    first call)."""
    check_one_of(what, url, client, store)
    if store is not None:
        return store
    if client is not None:
        return AsyncMemoryStore(client, namespace, policy, adopt_policy=True)
    return AsyncMemoryStore.from_url(str(url), namespace, policy, adopt_policy=True)


@dataclass(frozen=True, slots=True)
class Entry:
    """One item of a conversation, ready to be remembered."""

    id: str  # stable: the same item always gets the same id
    text: str  # the item serialized, as the adapter reads it back
    message: Message  # what the labeler reads; its text is what count_tokens counts
    group: str | None = None  # items of one group are kept or evicted together


def _batches(items: Sequence[Item]) -> Iterable[Sequence[Item]]:
    for start in range(0, len(items), MAX_BATCH):
        yield items[start : start + MAX_BATCH]


def recent_of(entries: Sequence[Entry], n: int) -> list[Entry]:
    """The last ``n`` of ``entries`` (the messages before the current turn, oldest first),
    with the other members of their groups among ``entries``: what was just said."""
    last = entries[max(0, len(entries) - n) :] if n > 0 else []
    groups = {e.group for e in last if e.group is not None}
    first = len(entries) - len(last)
    return [e for i, e in enumerate(entries) if i >= first or (e.group in groups)]


def _units(entries: Sequence[Entry]) -> list[list[Entry]]:
    """``entries`` as units that go together (a group whole), by their newest member."""
    units: dict[str, list[Entry]] = {}
    for e in entries:
        unit = units.pop(e.group if e.group is not None else f"\0{e.id}", [])
        units[e.group if e.group is not None else f"\0{e.id}"] = [*unit, e]
    return list(units.values())


def _skip(first: Sequence[Entry]) -> list[str]:
    """The ids the window leaves out: what is sent anyway, so that the budget left for
    the window is not spent on them twice (the newest MAX_SKIP; the hot tier then
    usually fits, which the window takes whole without ranking it)."""
    return [e.id for e in first[-MAX_SKIP:]]


def _compose(window: Context | None, first: Sequence[Entry]) -> list[tuple[str, str]]:
    """The window's (id, text) in the order first remembered, then those of ``first`` (the
    recent entries and the current turn, newer than the rest) that it does not hold."""
    history = [] if window is None else [(id, text or "") for id, text in window]
    held = {id for id, _ in history}
    return history + [(e.id, e.text) for e in first if e.id not in held]


class _Known:
    """The ids this process has seen stored, so that items passed again (a framework
    resends the whole history on every call) are not remembered again."""

    def __init__(self) -> None:
        self._ids: dict[str, None] = {}

    def __contains__(self, id: object) -> bool:
        return id in self._ids

    def add(self, ids: Iterable[str]) -> None:
        for id in ids:
            self._ids[id] = None
        while len(self._ids) > _KNOWN:
            del self._ids[next(iter(self._ids))]

    def clear(self) -> None:
        self._ids.clear()


StoreT = TypeVar("StoreT", MemoryStore, AsyncMemoryStore)
T = TypeVar("T")


class _Base(Generic[StoreT]):
    def __init__(
        self,
        store: StoreT,
        *,
        max_tokens: int,
        policy: Mapping[str, float | int | str] | None = None,
        labeler: Labeler = rules,
        count_tokens: TokenCounter = approx_tokens,
        pin_at: float = PIN_AT,
    ) -> None:
        self.store: StoreT = store
        self.max_tokens = max_tokens
        self.labeler, self.count_tokens, self.pin_at = labeler, count_tokens, pin_at
        # The policy given in code: applied to the namespace (settle) if it differs.
        self._wanted: dict[str, float | int | str] = {"max_tokens": max_tokens, **(policy or {})}
        conversation_policy(max_tokens, **(policy or {}))  # (BadPolicy here, not later)
        self._settled = False
        self._known = _Known()
        self._epoch: int | None = None  # of the namespace, as the last window saw it
        self._asked: Item | None = None  # the latest user message, as last remembered

    @property
    def known(self) -> Container[str]:
        """Ids this conversation has stored or found stored (the newest 10,000)."""
        return self._known

    def _changes(self, stored: Policy) -> dict[str, Any]:
        """The fields given in code that the namespace's stored policy does not have."""
        return {k: v for k, v in self._wanted.items() if getattr(stored, k) != v}

    def _unseen(self, entries: Sequence[Entry]) -> list[Entry]:
        return [e for e in entries if e.id not in self._known]

    def _new(self, entries: Sequence[Entry], stored: set[str]) -> list[Entry]:
        """``entries`` less those found ``stored``, which become known."""
        self._known.add(stored)
        return [e for e in entries if e.id not in stored]

    def _item(self, entry: Entry, importance: float) -> Item:
        """The memory of an entry; one over the whole budget is remembered alone at the
        lowest importance, so that it goes to the cold tier at once (kept, recallable)
        instead of being refused or evicting everything else."""
        tokens = self.count_tokens(entry.message.text)
        if 0 < self.max_tokens < tokens:
            log.warning(
                "memevict: %s costs %d tokens, over max_tokens %d: kept in the cold tier, "
                "sent only while it is the current turn",
                entry.id,
                tokens,
                self.max_tokens,
            )
            return Item(entry.id, OVER_BUDGET_IMPORTANCE, text=entry.text, tokens=self.max_tokens)
        return Item(
            entry.id,
            importance,
            text=entry.text,
            whitelist=importance >= self.pin_at,
            tokens=tokens,
            group=entry.group,
        )

    def _items(self, entries: Sequence[Entry], importances: Sequence[float]) -> list[Item]:
        """The memories of ``entries``. A user's message takes the importance of what
        answers it (the items after it, up to the next user message) less ASKED_BELOW
        where that is higher, so that an answer kept is seldom kept without its
        question: in the same call, or by remembering the question again (with its
        text) before the answer."""
        items = [self._item(e, i) for e, i in zip(entries, importances, strict=True)]
        out: list[Item] = []
        for entry, item in zip(entries, items, strict=True):
            asked = self._asked
            if entry.message.role == "user":
                self._asked = item if item.importance != OVER_BUDGET_IMPORTANCE else None
            elif asked is not None and item.importance - ASKED_BELOW > asked.importance:
                self._asked = replace(asked, importance=item.importance - ASKED_BELOW)
                if asked in out:  # (asked in this call: remembered once, lifted)
                    out[out.index(asked)] = self._asked
                else:
                    out.append(self._asked)
            out.append(item)
        return out

    def _cost(self, entries: Iterable[Entry]) -> int:
        return sum(self.count_tokens(e.message.text) for e in entries)

    def _first(
        self, tail: Sequence[Entry], recent: Sequence[Entry]
    ) -> tuple[list[Entry], int | None]:
        """What is sent whatever the ranks: the current turn ``tail`` (always) after the
        ``recent`` entries that fit, newest first, a group whole or not at all; and what
        is left of max_tokens for the window (0 or less: no room; None: no budget)."""
        left = None if self.max_tokens == 0 else self.max_tokens - self._cost(tail)
        mine = {e.id for e in tail}
        kept: list[Entry] = []
        for unit in reversed(_units([e for e in recent if e.id not in mine])):
            cost = self._cost(unit)
            if left is not None and cost > left:
                break
            kept[:0] = unit
            left = None if left is None else left - cost
        return kept + [e for e in tail], left

    def _recreating(self) -> None:
        """Before starting again a namespace lost under the store (NamespaceLost): the
        next window finds a new epoch (see _lost), so what the framework still holds is
        stored again."""
        log.warning(
            "memevict: namespace %r was lost (FLUSHDB, a restart without persistence, a "
            "failover): starting it again",
            self.store.namespace,
        )
        self._settled = False
        self._known.clear()

    def _lost(self, window: Context) -> bool:
        """Whether the namespace was created again since the last window (its keys lost):
        then nothing this conversation stored is there, whatever ``known`` says."""
        lost = self._epoch is not None and window.epoch != self._epoch
        self._epoch = window.epoch
        if lost:
            log.warning(
                "memevict: namespace %r was lost (FLUSHDB, idle_ttl_s, a restart without "
                "persistence): storing the conversation again",
                self.store.namespace,
            )
            self._known.clear()
        return lost


class Conversation(_Base[MemoryStore]):
    """One conversation in one namespace, for a :class:`~memevict.MemoryStore`.

    ``max_tokens`` is the prompt's budget (0: none); it and the Policy fields in
    ``policy`` are applied to the namespace if its stored policy differs (:meth:`settle`).
    ``labeler`` gives each item its importance (the built-in rules by default); an item
    at ``pin_at`` or above (an instruction, by the rules) is whitelisted, so it stays in
    the prompt however old (up to the policy's whitelist_cap). ``count_tokens`` gives its
    cost, of the text the model reads (``Entry.message.text``, not the stored JSON, whose
    field names and metadata the model never sees; :func:`approx_tokens` by default)."""

    def settle(self) -> None:
        """Applies the policy given in code to the namespace, in one atomic call, where
        the policy the store found differs (once; again after the namespace was lost)."""
        if not self._settled:
            changes = self._changes(self.store.policy)
            if changes:
                self.store.set_policy(**changes)
            self._settled = True

    def add(self, entries: Sequence[Entry], *, only_new: bool = False) -> None:
        """Remembers ``entries`` in order; with ``only_new``, those not stored yet. If
        the namespace was lost under the store, it is started again and they are all
        remembered (the next window finds a new epoch: :meth:`turn`)."""
        self.settle()
        asked = self._asked

        def attempt() -> None:
            self._asked = asked
            self._add(entries, only_new)

        self._again(attempt)

    def get(self, id: str) -> Memory | None:
        """The memory ``id`` as stored, or None (also when the namespace was lost under
        the store, which then starts it again)."""
        return self._again(lambda: self.store.get(id))

    def _again(self, send: Callable[[], T]) -> T:
        """``send()``, and once more after starting again a namespace lost under the
        store (NamespaceLost: nothing was written)."""
        try:
            return send()
        except NamespaceLost:
            self._recreating()
            self.store.recreate()
            return send()

    def _add(self, entries: Sequence[Entry], only_new: bool) -> None:
        if only_new:
            entries = self._unseen(entries)
            entries = self._new(entries, {e.id for e in entries if self.store.get(e.id)})
        items = self._items(entries, importances_of(self.labeler, [e.message for e in entries]))
        for batch in _batches(items):
            self.store.remember_many(batch)
        self._known.add(e.id for e in entries)

    def _window(self, budget: int | None, first: Sequence[Entry]) -> tuple[Context, bool]:
        """The window (ids and texts) of what ``first`` (sent anyway) leaves of the hot
        tier, and whether the namespace was lost since the last."""
        window = self._again(lambda: self.store.context(budget, skip=_skip(first)))
        lost = self._lost(window)
        if lost:
            self._settled = False
        return window, lost

    def window(
        self, tail: Sequence[Entry] = (), recent: Sequence[Entry] = ()
    ) -> list[tuple[str, str]]:
        """The prompt's items as (id, stored text), in time order: the window of the hot
        tier within what ``tail`` (the current turn, always sent) and the ``recent``
        entries that fit (what was just said, newest first) leave of max_tokens."""
        self.settle()
        first, budget = self._first(tail, recent)
        if budget is not None and budget <= 0:
            return _compose(None, first)
        return _compose(self._window(budget, first)[0], first)

    def turn(
        self,
        history: Sequence[Entry],
        tail: Sequence[Entry],
        *,
        recent: Sequence[Entry] = (),
        again: Callable[[], Sequence[Entry]] | None = None,
    ) -> list[tuple[str, str]]:
        """One model call: remembers the new ``history``, reads the window for the current
        turn ``tail`` and the ``recent`` entries, then remembers the turn (after the window
        is read, so that it does not take the history's room in it). Returns
        :meth:`window`'s answer. If the
        namespace turns out to have been lost, the whole history (``again()``, if
        ``history`` holds only what was new) is remembered again and the window read
        again: nothing the framework still holds is lost for good."""
        self.add(history, only_new=True)
        first, budget = self._first(tail, recent)
        window = None
        if budget is None or budget > 0:
            window, lost = self._window(budget, first)
            if lost:  # store what the framework still holds, then read again
                self.add(history if again is None else again(), only_new=True)
                window, _ = self._window(budget, first)
        self.add(self._unseen(tail))  # (new but for a retried call: no lookup)
        return _compose(window, first)


class AsyncConversation(_Base[AsyncMemoryStore]):
    """:class:`Conversation` for an :class:`~memevict.aio.AsyncMemoryStore`; the labeler
    may be async."""

    async def settle(self) -> None:
        """See :meth:`Conversation.settle`."""
        if not self._settled:
            changes = self._changes((await self.store).policy)
            if changes:
                await self.store.set_policy(**changes)
            self._settled = True

    async def add(self, entries: Sequence[Entry], *, only_new: bool = False) -> None:
        """See :meth:`Conversation.add`."""
        await self.settle()
        asked = self._asked

        async def attempt() -> None:
            self._asked = asked
            await self._add(entries, only_new)

        await self._again(attempt)

    async def get(self, id: str) -> Memory | None:
        """See :meth:`Conversation.get`."""
        return await self._again(lambda: self.store.get(id))

    async def _again(self, send: Callable[[], Awaitable[T]]) -> T:
        """See :meth:`Conversation._again`."""
        try:
            return await send()
        except NamespaceLost:
            self._recreating()
            await self.store.recreate()
            return await send()

    async def _add(self, entries: Sequence[Entry], only_new: bool) -> None:
        if only_new:
            entries = self._unseen(entries)
            entries = self._new(entries, {e.id for e in entries if await self.store.get(e.id)})
        importances = await aimportances_of(self.labeler, [e.message for e in entries])
        items = self._items(entries, importances)
        for batch in _batches(items):
            await self.store.remember_many(batch)
        self._known.add(e.id for e in entries)

    async def _window(self, budget: int | None, first: Sequence[Entry]) -> tuple[Context, bool]:
        """See :meth:`Conversation._window`."""
        window = await self._again(lambda: self.store.context(budget, skip=_skip(first)))
        lost = self._lost(window)
        if lost:
            self._settled = False
        return window, lost

    async def window(
        self, tail: Sequence[Entry] = (), recent: Sequence[Entry] = ()
    ) -> list[tuple[str, str]]:
        """See :meth:`Conversation.window`."""
        await self.settle()
        first, budget = self._first(tail, recent)
        if budget is not None and budget <= 0:
            return _compose(None, first)
        return _compose((await self._window(budget, first))[0], first)

    async def turn(
        self,
        history: Sequence[Entry],
        tail: Sequence[Entry],
        *,
        recent: Sequence[Entry] = (),
        again: Callable[[], Sequence[Entry]] | None = None,
    ) -> list[tuple[str, str]]:
        """See :meth:`Conversation.turn`."""
        await self.add(history, only_new=True)
        first, budget = self._first(tail, recent)
        window = None
        if budget is None or budget > 0:
            window, lost = await self._window(budget, first)
            if lost:  # store what the framework still holds, then read again
                await self.add(history if again is None else again(), only_new=True)
                window, _ = await self._window(budget, first)
        await self.add(self._unseen(tail))  # (new but for a retried call: no lookup)
        return _compose(window, first)
