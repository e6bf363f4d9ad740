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

from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from memevict.aio import AsyncMemoryStore
from memevict.commands import MAX_BATCH, Item
from memevict.errors import BadArgument
from memevict.importance import Labeler, Message, aimportance_of, importance_of, rules
from memevict.policy import Policy
from memevict.results import Window
from memevict.store import MemoryStore

TokenCounter = Callable[[str], int]

# The hot tier is bounded by tokens; this only keeps a count bound out of the way.
MAX_HOT = 100_000
PIN_AT = 10.0  # the importance of an instruction (memevict.importance.CATEGORIES)
_KNOWN = 10_000  # ids an adapter remembers having stored, per conversation


def approx_tokens(text: str) -> int:
    """About four characters per token, the usual rule of thumb for English text with
    OpenAI's and Anthropic's tokenizers; at least 1. Pass your tokenizer's count for
    exact budgets (``lambda text: len(encoding.encode(text))`` with tiktoken)."""
    return max(1, (len(text) + 3) // 4)


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
        "half_life_memories": 200.0,
    }
    fields.update(changes)
    return Policy(**fields)  # type: ignore[arg-type]


def _url(what: str, url: str | None, store: object) -> str:
    """``url``, checked to be given exactly when ``store`` is not."""
    if (url is None) == (store is None) or url is None:
        raise BadArgument(f"give {what} either url or store")
    return url


def open_store(
    what: str,
    url: str | None,
    store: MemoryStore | None,
    namespace: str,
    max_tokens: int,
    policy: dict[str, float | int | str],
) -> MemoryStore:
    """An adapter's store: ``store``, or one of its own on ``url`` with
    :func:`conversation_policy` (adopting the namespace's policy if it has one)."""
    if store is not None and url is None:
        return store
    return MemoryStore.from_url(
        _url(what, url, store),
        namespace,
        conversation_policy(max_tokens, **policy),
        adopt_policy=True,
    )


def open_async_store(
    what: str,
    url: str | None,
    store: AsyncMemoryStore | None,
    namespace: str,
    max_tokens: int,
    policy: dict[str, float | int | str],
) -> AsyncMemoryStore:
    """:func:`open_store` for an :class:`~memevict.aio.AsyncMemoryStore`."""
    if store is not None and url is None:
        return store
    return AsyncMemoryStore.from_url(
        _url(what, url, store),
        namespace,
        conversation_policy(max_tokens, **policy),
        adopt_policy=True,
    )


@dataclass(frozen=True, slots=True)
class Entry:
    """One item of a conversation, ready to be remembered."""

    id: str  # stable: the same item always gets the same id
    text: str  # the item serialized, as the adapter reads it back
    message: Message  # what the labeler reads; its text is what count_tokens counts
    group: str | None = None  # items of one group are kept or evicted together


def _item(entry: Entry, importance: float, count_tokens: TokenCounter, pin_at: float) -> Item:
    return Item(
        entry.id,
        importance,
        text=entry.text,
        whitelist=importance >= pin_at,
        tokens=count_tokens(entry.message.text),
        group=entry.group,
    )


def _batches(items: Sequence[Item]) -> Iterable[Sequence[Item]]:
    for start in range(0, len(items), MAX_BATCH):
        yield items[start : start + MAX_BATCH]


def _budget(max_tokens: int, tail: Sequence[Entry], count_tokens: TokenCounter) -> int:
    """What is left of the budget for history once the current turn is in the prompt."""
    return max_tokens - sum(count_tokens(e.message.text) for e in tail)


def _compose(window: Window | None, tail: Sequence[Entry]) -> list[tuple[str, str]]:
    """The window's (id, text) in time order, then the current turn's (newer than all)."""
    mine = {e.id for e in tail}
    history = [] if window is None else [(m.id, m.text or "") for m in window if m.id not in mine]
    return history + [(e.id, e.text) for e in tail]


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


StoreT = TypeVar("StoreT", MemoryStore, AsyncMemoryStore)


class _Base(Generic[StoreT]):
    def __init__(
        self,
        store: StoreT,
        *,
        labeler: Labeler = rules,
        count_tokens: TokenCounter = approx_tokens,
        pin_at: float = PIN_AT,
    ) -> None:
        self.store: StoreT = store
        self.labeler, self.count_tokens, self.pin_at = labeler, count_tokens, pin_at
        self._known = _Known()

    @property
    def known(self) -> Container[str]:
        """Ids this conversation has stored or found stored (the newest 10,000)."""
        return self._known

    def _unseen(self, entries: Sequence[Entry]) -> list[Entry]:
        return [e for e in entries if e.id not in self._known]

    def _new(self, entries: Sequence[Entry], stored: set[str]) -> list[Entry]:
        """``entries`` less those found ``stored``, which become known."""
        self._known.add(stored)
        return [e for e in entries if e.id not in stored]

    def _item(self, entry: Entry, importance: float) -> Item:
        return _item(entry, importance, self.count_tokens, self.pin_at)

    def _budget(self, tail: Sequence[Entry]) -> int:
        return _budget(self.store.policy.max_tokens, tail, self.count_tokens)


class Conversation(_Base[MemoryStore]):
    """One conversation in one namespace, for a :class:`~memevict.MemoryStore`.

    ``labeler`` gives each item its importance (the built-in rules by default); an item
    at ``pin_at`` or above (an instruction, by the rules) is whitelisted, so it stays in
    the prompt however old (up to the policy's whitelist_cap). ``count_tokens`` gives its
    cost, of the text the model reads (``Entry.message.text``, not the stored JSON, whose
    field names and metadata the model never sees; :func:`approx_tokens` by default)."""

    def add(self, entries: Sequence[Entry], *, only_new: bool = False) -> None:
        """Remembers ``entries`` in order; with ``only_new``, those not stored yet."""
        if only_new:
            entries = self._unseen(entries)
            entries = self._new(entries, {e.id for e in entries if self.store.get(e.id)})
        items = [self._item(e, importance_of(self.labeler, e.message)) for e in entries]
        for batch in _batches(items):
            self.store.remember_many(batch)
        self._known.add(e.id for e in entries)

    def window(self, tail: Sequence[Entry] = ()) -> list[tuple[str, str]]:
        """The prompt's items as (id, stored text), in time order: the window of the hot
        tier within what ``tail`` (the current turn, always sent) leaves of max_tokens."""
        budget = self._budget(tail)
        return _compose(self.store.window(budget) if budget > 0 else None, tail)

    def turn(self, history: Sequence[Entry], tail: Sequence[Entry]) -> list[tuple[str, str]]:
        """One model call: remembers the new ``history``, reads the window for the current
        turn ``tail``, then remembers the turn (after the window is read, so that it does
        not take the history's room in it). Returns :meth:`window`'s answer."""
        self.add(history, only_new=True)
        window = self.window(tail)
        self.add(tail, only_new=True)
        return window


class AsyncConversation(_Base[AsyncMemoryStore]):
    """:class:`Conversation` for an :class:`~memevict.aio.AsyncMemoryStore`; the labeler
    may be async."""

    async def add(self, entries: Sequence[Entry], *, only_new: bool = False) -> None:
        """Remembers ``entries`` in order; with ``only_new``, those not stored yet."""
        if only_new:
            entries = self._unseen(entries)
            entries = self._new(entries, {e.id for e in entries if await self.store.get(e.id)})
        items = [self._item(e, await aimportance_of(self.labeler, e.message)) for e in entries]
        for batch in _batches(items):
            await self.store.remember_many(batch)
        self._known.add(e.id for e in entries)

    async def window(self, tail: Sequence[Entry] = ()) -> list[tuple[str, str]]:
        """See :meth:`Conversation.window`."""
        await self.store  # (opened: its policy read)
        budget = self._budget(tail)
        return _compose(await self.store.window(budget) if budget > 0 else None, tail)

    async def turn(self, history: Sequence[Entry], tail: Sequence[Entry]) -> list[tuple[str, str]]:
        """See :meth:`Conversation.turn`."""
        await self.add(history, only_new=True)
        window = await self.window(tail)
        await self.add(tail, only_new=True)
        return window
