"""A session for the OpenAI Agents SDK that evicts by importance x recency, not FIFO.

``MemevictSession`` implements the SDK's ``Session`` protocol structurally (this module
never imports the SDK)::

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
namespace.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Sequence
from typing import Any

from memevict.aio import AsyncMemoryStore
from memevict.errors import NotFound
from memevict.importance import Labeler, Message, rules
from memevict.integrations._conversation import (
    MAX_TOKENS,
    PIN_AT,
    RECENT,
    AsyncConversation,
    Entry,
    Settings,
    TokenCounter,
    approx_tokens,
    namespace_for,
    open_conversation,
    recent_of,
)
from memevict.registry import AsyncClient

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
    """The group of a tool call or its output: ``call:<call_id>``."""
    call_id = item.get("call_id")
    kind = str(item.get("type") or "")
    if call_id and (kind.endswith("_call") or kind.endswith("_call_output")):
        return f"call:{call_id}"[:256]
    return None


def entries_of(
    items: Sequence[Item], open_group: str | None = None
) -> tuple[list[Entry], str | None]:
    """Entries for new items, in order, and the group a trailing reasoning item left open
    for the next item. A reasoning item takes the group of the item after it (or a group
    of its own that the next item joins)."""
    ids = [secrets.token_hex(8) for _ in items]
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
        Entry(id, json.dumps(item, separators=(",", ":")), message_of(item), group)
        for id, item, group in zip(ids, items, groups, strict=True)
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


class MemevictSession:
    """An OpenAI Agents SDK session backed by one memevict namespace, ``openai:<session_id>``
    (hashed where the id has characters a namespace cannot take; ``namespace`` names
    another). Give it one of ``url`` (a single server or a cluster node; the session owns
    that client: :meth:`close`), ``client`` (a ``redis.asyncio`` client, shared by any
    number of sessions) or ``store`` (an :class:`~memevict.aio.AsyncMemoryStore`, whose
    namespace it uses). ``max_tokens`` is the history's token budget (0: none), in which
    the ``recent`` items this session added last are sent whatever their rank (while they
    fit, a group whole); it and
    any other Policy field given in ``policy`` are applied to the namespace when its
    stored policy differs. ``MemevictSession.from_url(session_id, url, ...)`` is the
    same as ``url=``."""

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
        session_settings: Any = None,
        **policy: float | int | str,
    ) -> None:
        self.conversation = open_conversation(
            AsyncConversation,
            "MemevictSession",
            namespace or namespace_for("openai", session_id),
            Settings(max_tokens, policy, labeler, count_tokens, pin_at),
            url=url,
            client=client,
            store=store,
        )
        self.store = self.conversation.store
        self.session_id = session_id
        self.session_settings = session_settings
        self._open_group: str | None = None
        self.recent = recent
        self._added: list[Entry] = []  # the newest entries this session added (their groups)

    @classmethod
    def from_url(cls, session_id: str, url: str, **kwargs: Any) -> MemevictSession:
        """A session on a client of its own of ``url`` (closed by :meth:`close`)."""
        return cls(session_id, url=url, **kwargs)

    async def get_items(self, limit: int | None = None) -> list[Item]:
        """The window in time order (its last ``limit`` items), with no tool call cut from
        its output nor reasoning item from the item after it."""
        recent = recent_of(self._added, self.recent)
        items = loads_all([text for _, text in await self.conversation.window(recent=recent)])
        return whole_calls(items) if limit is None else whole_tail(items, limit)

    async def add_items(self, items: list[Item]) -> None:
        """Remembers new items, evicting to the token budget (an item over the whole budget
        goes straight to the cold tier, with a warning)."""
        if not items:
            return
        entries, self._open_group = entries_of(items, self._open_group)
        await self.conversation.add(entries)
        self._added = [*self._added, *entries][-(self.recent + _GROUP_ROOM) :]

    async def pop_item(self) -> Item | None:
        """Removes and returns the newest item of the window (its group keeps the rest)."""
        window = await self.conversation.window()
        if not window:
            return None
        id, text = window[-1]
        memory = await self.store.get(id)
        if memory is not None and memory.group is not None:
            # Out of its group first, so that forget takes it alone.
            await self.store.remember(
                id, memory.importance, tokens=memory.tokens, group=f"pop:{id}"
            )
        with contextlib.suppress(NotFound):  # (forgotten meanwhile by another worker)
            await self.store.forget(id)
        self._added = [e for e in self._added if e.id != id]
        return dict(json.loads(text))

    async def clear_session(self) -> None:
        """Deletes the session's namespace, cold tier included."""
        await self.store.drop()
        self._open_group, self._added = None, []

    async def close(self) -> None:
        """Closes the client if the session made it (from ``url``)."""
        await self.store.aclose()
