"""A session for the OpenAI Agents SDK that evicts by importance x recency, not FIFO.

``MemevictSession`` implements the SDK's ``Session`` protocol structurally (this module
imports the SDK only to make :meth:`MemevictSession.recall_tool`)::

    session = MemevictSession.from_url("user-42", "redis://localhost:6379", max_tokens=8000)
    result = await Runner.run(agent, "hi", session=session)

Each item is one memory: its JSON is the text, its importance comes from the labeler
(:func:`memevict.importance.rules` by default) and its cost from ``count_tokens`` of
the text the model reads of it (:func:`message_of`). A
``function_call`` (any ``*_call`` item with a ``call_id``) and its output are one group,
and a ``reasoning`` item joins the group of the item after it, so a window never holds
half of either (the Responses API rejects both). The hot tier holds at most
``max_tokens``; what is evicted stays in the cold tier, recallable with the store's
``recall``; an item over the whole budget goes there at once (it is sent while it is
the current turn, by the SDK). ``get_items`` returns the window in time order;
``pop_item`` removes the newest item of the window; ``clear_session`` drops the
namespace. ``session.recall_tool()`` is a ``function_tool``, ``recall_memory(query)``, with
which the model searches the session's earlier items itself, evicted ones included.

An item's id is the hash of the item before it and of its own JSON (:func:`item_id`):
the same items added again after a failed call (a retried ``add_items``, or a retried
run, which adds its input again) get the same ids and are stored once, while the same
words said again later follow other items, and are stored again.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import secrets
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from memevict.aio import AsyncMemoryStore
from memevict.commands import MAX_GROUP_BYTES
from memevict.errors import NotFound
from memevict.importance import Labeler, Message, rules
from memevict.integrations._conversation import (
    MAX_TOKENS,
    PIN_AT,
    PROTECTED,
    RECALL_DOC,
    RECALL_K,
    RECALL_TOKENS,
    RECALL_TOOL,
    RECENT,
    TOKEN_WEIGHT,
    AsyncConversation,
    Entry,
    OnEvicted,
    OnLost,
    Settings,
    TokenCounter,
    approx_tokens,
    arun_steps,
    check_recall,
    fits,
    hashed_name,
    namespace_for,
    open_conversation,
    recent_of,
)
from memevict.registry import AsyncClient

if TYPE_CHECKING:
    from agents import FunctionTool

Item = dict[str, Any]  # the SDK's TResponseInputItem, a TypedDict
_GROUP_ROOM = 32  # entries kept past ``recent``, for the rest of their groups


def _text_of(value: object) -> str:
    """The readable text of an item's content or output (a string or a list of parts)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [p.get("text") or p.get("refusal") or "" for p in value if isinstance(p, dict)]
        return "\n".join(p for p in parts if p)
    return ""


def loads_all(texts: Sequence[str]) -> list[Item]:
    """The items of texts this session stored (each one JSON object): one ``json.loads``
    of them as one array (a third of the time of one call per text), checked to hold one
    object per text; one call per text where it does not (a text edited by hand: the
    error, if any, is that text's)."""
    if texts:
        with contextlib.suppress(ValueError):
            items = json.loads(f"[{','.join(texts)}]")
            if len(items) == len(texts) and all(isinstance(item, dict) for item in items):
                return list(items)
    return [json.loads(text) for text in texts]


def _is_item(value: object) -> bool:
    return isinstance(value, dict) and ("type" in value or "role" in value)


def items_of(window: Sequence[tuple[str, str]]) -> tuple[list[Item], list[str]]:
    """The items of a window's texts, and the ids of the texts that are not an item (a
    memory this session did not write: an operator's ``memevict remember``), left out."""
    texts = [text for _, text in window]
    with contextlib.suppress(ValueError):
        items = loads_all(texts)
        if all(isinstance(i, dict) and ("type" in i or "role" in i) for i in items):
            return items, []
    kept, foreign = [], []
    for id, text in window:
        try:
            item = json.loads(text)
        except ValueError:
            item = None
        if _is_item(item):
            kept.append(item)
        else:
            foreign.append(id)
    return kept, foreign


def read_item(text: str) -> Message | None:
    """What the model reads of an item this session stored (:func:`message_of`), or None
    for a text that is not one."""
    items, _ = items_of([("", text)])
    return message_of(items[0]) if items else None


def message_of(item: Item) -> Message:
    """What the labeler reads of an item."""
    kind = str(item.get("type") or "message")
    if "role" in item:
        text = _text_of(item.get("content"))
    elif kind.endswith("_output"):
        text = _text_of(item.get("output"))
    elif kind.endswith("_call"):
        text = f"{item.get('name', '')}({item.get('arguments', '')})"
    else:
        text = _text_of(item.get("summary")) or _text_of(item.get("content"))
    return Message(text, role=item.get("role"), kind=kind)


def call_group(item: Item) -> str | None:
    """The group of a tool call or its output: ``call:<call_id>``, or
    ``call:sha256:<hex of the call_id>`` for one that is not a group memevict takes (over
    256 bytes, a NUL, a lone surrogate) or that starts with ``sha256:``."""
    call_id = item.get("call_id")
    kind = str(item.get("type") or "")
    if call_id and (kind.endswith("_call") or kind.endswith("_call_output")):
        return hashed_name("call:", str(call_id), lambda group: fits(group, MAX_GROUP_BYTES))
    return None


def chain_root() -> str:
    """Where a session object's chain of ids starts: its own (see :func:`item_id`)."""
    return secrets.token_hex(16)


def item_id(after: str, text: str) -> str:
    """The id of an item whose JSON is ``text``, added after the item ``after``: the first
    128 bits of their SHA-256, as 22 characters of URL-safe base64 (a 64-character hex
    id, as memevict gave before issue 41, is stored again in every place an id is kept:
    texts, metadata, the cold tier, the lexical index, the receipts)."""
    digest = hashlib.sha256(f"{after}\n{text}".encode("utf-8", "surrogatepass")).digest()
    return base64.urlsafe_b64encode(digest[:16]).rstrip(b"=").decode()


def entries_of(
    items: Sequence[Item], open_group: str | None = None, after: str | None = None
) -> tuple[list[Entry], str | None]:
    """Entries for new items, in order, and the group a trailing reasoning item left open
    for the next item. A reasoning item takes the group of the item after it (or a group
    of its own that the next item joins). Each id is :func:`item_id` of the one before
    (``after`` for the first: a chain of its own if None) and of the item's JSON."""
    texts = [json.dumps(item, separators=(",", ":")) for item in items]
    ids: list[str] = []
    for text in texts:
        ids.append(item_id(ids[-1] if ids else after or chain_root(), text))
    groups: list[str | None] = [call_group(item) for item in items]
    for i in range(len(items) - 1, -1, -1):  # a reasoning item and the one after it
        if items[i].get("type") == "reasoning":
            after = groups[i + 1] if i + 1 < len(items) else None
            if after is None:
                after = f"with:{ids[i]}"
                if i + 1 < len(items):
                    groups[i + 1] = after
            groups[i] = after
    if open_group is not None and items and groups[0] is None:
        groups[0] = open_group
    left_open = groups[-1] if items and items[-1].get("type") == "reasoning" else None
    entries = [
        Entry(id, text, message_of(item), group)
        for id, text, item, group in zip(ids, texts, items, groups, strict=True)
    ]
    return entries, left_open


def _is_call(item: Item) -> bool:
    return str(item.get("type") or "").endswith("_call") and bool(item.get("call_id"))


def _is_output(item: Item) -> bool:
    return str(item.get("type") or "").endswith("_call_output") and bool(item.get("call_id"))


def whole_calls(items: Sequence[Item], before: Item | None = None) -> list[Item]:
    """``items`` less what the Responses API would reject: a tool call whose output is not
    there, an output whose call is not there, and a ``reasoning`` item whose item after
    it is not there. ``before``: the item before the first (a call right after a
    reasoning item that is cut off goes too)."""
    if not any("call_id" in item or item.get("type") == "reasoning" for item in items):
        return list(items)  # (a conversation without tools: nothing to cut)
    calls = {item["call_id"] for item in items if _is_call(item)}
    outputs = {item["call_id"] for item in items if _is_output(item)}
    if before is not None and before.get("type") == "reasoning" and items and _is_call(items[0]):
        calls.discard(items[0]["call_id"])
    kept = [
        not (_is_call(item) and not (item["call_id"] in outputs and item["call_id"] in calls))
        and not (_is_output(item) and item["call_id"] not in calls)
        for item in items
    ]
    for i in range(len(items) - 1, -1, -1):
        if items[i].get("type") == "reasoning" and not (i + 1 < len(items) and kept[i + 1]):
            kept[i] = False
    return [item for item, keep in zip(items, kept, strict=True) if keep]


def whole_tail(items: list[Item], limit: int) -> list[Item]:
    """At most the last ``limit`` items, with no tool call, output or reasoning item cut
    from its other half (see :func:`whole_calls`): fewer where the cut would split one."""
    start = max(0, len(items) - limit)
    return whole_calls(items[start:], items[start - 1] if start > 0 else None)


def _content_key(item: Item) -> str:
    """An item's content, for telling a recalled item the SDK stores again from new input:
    its fields but the ``id`` the SDK may add or drop."""
    return json.dumps({k: v for k, v in item.items() if k != "id"}, sort_keys=True, default=str)


# A summariser's callback: the session's namespace and the items a write evicted, in the
# order they left.
OnEvict = Callable[[str, list[Item]], object]


def handing_to(on_evict: OnEvict) -> OnEvicted:
    """The conversation's hook for ``on_evict``: the evicted texts read as items (a memory
    the session did not write, an operator's, is left out); nothing when none is one."""

    def handed(namespace: str, left: list[tuple[str, str | None]]) -> object:
        items, _ = items_of([(id, text) for id, text in left if text is not None])
        return on_evict(namespace, items) if items else None

    return handed


class MemevictSession:
    """An OpenAI Agents SDK session backed by one memevict namespace, ``openai:<session_id>``
    (hashed where the id has characters a namespace cannot take, or starts with
    ``sha256:``; ``namespace`` names another). Give it one of ``url`` (a single server or
    a cluster node; the session owns that client: :meth:`close`), ``client`` (a
    ``redis.asyncio`` client, shared by any number of sessions) or ``store`` (an
    :class:`~memevict.aio.AsyncMemoryStore`, whose namespace it uses). ``max_tokens`` is
    the history's token budget (0: none), in which the ``recent`` items this session
    added last are sent whatever their rank (while they fit, a group whole); it and any
    other Policy field given in ``policy`` are applied to the namespace when its stored
    policy differs. ``on_lost`` is called with the namespace when the session finds it
    lost (a restart without persistence, a FLUSHDB, a clear by another worker): the
    session then goes on from empty; raise from it to fail that call. ``recall_share``:
    the share of the budget that earlier messages matching the latest user message fill,
    evicted ones included (None: about 1,000 tokens, at most half; 0: none, and the
    namespace keeps no index).
    ``token_weight``: how far a message longer than 25 tokens ranks by its importance per
    token (0: by importance alone; default 0.35; see docs/adapters.md).
    ``on_evict``: called (and awaited, if it returns an awaitable) with the namespace and
    the items each :meth:`add_items` evicted from the hot tier, as they left: each
    eviction once, whichever of several workers on the session made it (for a summariser
    of what leaves; it runs inside ``add_items``: start slow work as a task of its own; an
    exception from it is logged and the session goes on).
    ``MemevictSession.from_url(session_id, url, ...)`` is the same as ``url=``."""

    def __init__(
        self,
        session_id: str,
        *,
        url: str | None = None,
        client: AsyncClient | None = None,
        store: AsyncMemoryStore | None = None,
        max_tokens: int = MAX_TOKENS,
        namespace: str | None = None,
        labeler: Labeler = rules,
        count_tokens: TokenCounter = approx_tokens,
        pin_at: float = PIN_AT,
        recent: int = RECENT,
        on_lost: OnLost | None = None,
        recall_share: float | None = None,
        token_weight: float = TOKEN_WEIGHT,
        session_settings: Any = None,
        on_evict: OnEvict | None = None,
        **policy: float | int | str,
    ) -> None:
        self.on_lost = on_lost
        # (its recent messages stay hot: get_items is served from the hot tier held)
        policy = {"protect_memories": PROTECTED, **policy}
        self.conversation = open_conversation(
            AsyncConversation,
            "MemevictSession",
            namespace or namespace_for("openai", session_id),
            Settings(
                max_tokens,
                policy,
                labeler,
                count_tokens,
                pin_at,
                self._lost,
                recall_share,
                token_weight,
                None if on_evict is None else handing_to(on_evict),
            ),
            url=url,
            client=client,
            store=store,
        )
        self.store = self.conversation.store
        self.session_id = session_id
        self.session_settings = session_settings
        self.recent = recent
        self._start()

    def _start(self) -> None:
        """What the session holds of its conversation, anew (cleared or lost)."""
        self._open_group: str | None = None
        self._added: list[Entry] = []  # the newest entries this session added (their groups)
        self._head = chain_root()  # the id of the last item added (see item_id)
        # Where the items added since the last get_items began (a run reads, then adds its
        # input), the first of them, and whether an add failed since: a run retried after
        # the failure adds its input again, after that same item.
        self._turn: tuple[str, str | None] = (self._head, None)
        self._turn_first: str | None = None
        self._failed = False
        # The items recall_input sent that the run's history did not hold (recalled
        # ones): the SDK stores them again with the input, and add_items skips them.
        self._sent_again: Counter[str] = Counter()

    def _lost(self, namespace: str) -> None:
        self._start()
        if self.on_lost is not None:
            self.on_lost(namespace)

    @classmethod
    def from_url(cls, session_id: str, url: str, **kwargs: Any) -> MemevictSession:
        """A session on a client of its own of ``url`` (closed by :meth:`close`)."""
        return cls(session_id, url=url, **kwargs)

    async def _window(self) -> list[tuple[str, str]]:
        # Recall only for a question not answered yet: Runner.run reads get_items() before
        # it adds the run's input, when the latest user message is the last run's, answered
        # (what matches it then only takes budget from the window: RESULTS.md).
        recent = recent_of(self._added, self.recent)
        return await self.conversation.window(recent=recent, asking=True)

    def _items(self, window: Sequence[tuple[str, str]]) -> list[Item]:
        items, foreign = items_of(window)
        self.conversation.note_foreign(foreign)
        return items

    async def get_items(self, limit: int | None = None) -> list[Item]:
        """The window in time order (its last ``limit`` items), with no tool call cut from
        its output nor reasoning item from the item after it."""
        if not self._failed:
            self._turn, self._turn_first = (self._head, self._open_group), None
        self._sent_again.clear()  # (a run reads first: what a failed run sent is stale)
        items = self._items(await self._window())
        return whole_calls(items) if limit is None else whole_tail(items, limit)

    async def recall_input(self, history: list[Item], new_input: list[Item]) -> list[Item]:
        """A ``session_input_callback`` for the SDK's ``RunConfig``, for recall through
        ``Runner.run``: the run reads :meth:`get_items` before it knows its input, so the
        window is read again with the input as the current turn: its latest user message is
        the query, and its tokens come out of ``max_tokens``. Returns that window, then
        ``new_input`` itself (the run stores it, as without the callback). The SDK stores
        what the callback returns beyond ``history`` as the turn's own items: the recalled
        ones are noted, and the next :meth:`add_items` does not store them again. One more
        read of the store a run; ``recall_share=0``: ``history + new_input``, no read."""
        self._sent_again.clear()
        if not new_input or self.conversation.settings.recall_share == 0:
            return history + new_input
        tail, _ = entries_of(new_input, self._open_group, self._head)
        recent = recent_of(self._added, self.recent)
        window = await self.conversation.window(tail, recent)
        ids = {e.id for e in tail}
        found = whole_calls(self._items([w for w in window if w[0] not in ids]))
        # The SDK stores what the callback returns beyond the history and the input as new
        # items of the turn: note those (by content), so that add_items does not store a
        # recalled message a second time.
        held = Counter(map(_content_key, history))
        for item in found:
            key = _content_key(item)
            if held[key] > 0:
                held[key] -= 1
            else:
                self._sent_again[key] += 1
        return found + new_input

    async def add_items(self, items: list[Item]) -> None:
        """Remembers new items, evicting to the token budget (an item over the whole budget
        goes straight to the cold tier, with a warning). The same items added again after
        a failed call are stored once (see :func:`item_id`)."""
        if self._sent_again:  # (the first add after recall_input: the run's input)
            sent, self._sent_again = self._sent_again, Counter()
            unsent = []
            for item in items:
                key = _content_key(item)
                if sent[key] > 0:
                    sent[key] -= 1
                else:
                    unsent.append(item)
            items = unsent
        if not items:
            return
        after, open_group = self._head, self._open_group
        if self._failed and self._turn_first is not None:  # (a retried run's input?)
            again, _ = entries_of(items[:1], self._turn[1], self._turn[0])
            if again[0].id == self._turn_first:
                after, open_group = self._turn
        entries, left_open = entries_of(items, open_group, after)
        try:
            await self.conversation.add(entries)
        except BaseException:
            self._failed = True  # (the same items again get the same ids)
            raise
        if (after, open_group) == self._turn:
            self._turn_first = entries[0].id
        self._failed = False
        self._head, self._open_group = entries[-1].id, left_open
        ids = {e.id for e in entries}
        kept = [e for e in self._added if e.id not in ids]
        self._added = [*kept, *entries][-(self.recent + _GROUP_ROOM) :]

    async def pop_item(self) -> Item | None:
        """Removes and returns the newest item of the window (its group keeps the rest)."""
        window = await self._window()
        readable = [(id, text) for id, text in window if self._items([(id, text)])]
        if not readable:
            return None
        id, text = readable[-1]
        memory = await self.store.get(id)
        if memory is not None and memory.group is not None:
            # Out of its group first, so that forget takes it alone.
            moved = await self.store.remember(
                id, memory.importance, tokens=memory.tokens, group=f"pop:{id}"
            )
            await arun_steps(self.conversation.evicted_steps(moved.evicted))
        with contextlib.suppress(NotFound):  # (forgotten meanwhile by another worker)
            await self.store.forget(id)
        self.conversation.forget_asked(id)  # (not lifted back as a question)
        self._added = [e for e in self._added if e.id != id]
        return dict(json.loads(text))

    def recall_tool(self, *, k: int = RECALL_K, max_tokens: int = RECALL_TOKENS) -> FunctionTool:
        """The tool ``recall_memory(query)`` for ``Agent(tools=[...])``: the session's ``k``
        items, evicted ones included, that best match the words of the model's query, as
        text of at most ``max_tokens`` tokens (``count_tokens``), oldest first."""
        from agents import function_tool

        check_recall(k, max_tokens)

        async def recall_memory(query: str) -> str:
            conversation = self.conversation  # (a new one after clear_session)
            return await conversation.recall_memory(query, read_item, k=k, max_tokens=max_tokens)

        recall_memory.__doc__ = RECALL_DOC
        return function_tool(recall_memory, name_override=RECALL_TOOL)

    async def clear_session(self) -> None:
        """Deletes the session's namespace, cold tier included; nothing this session
        held of it is sent or stored again."""
        await self.store.drop()
        self.conversation = self.conversation.fresh()
        self._start()

    async def close(self) -> None:
        """Closes the client if the session made it (from ``url``)."""
        await self.store.aclose()
