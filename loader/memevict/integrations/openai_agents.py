"""A session for the OpenAI Agents SDK that evicts by importance x recency, not FIFO.

``MemevictSession`` implements the SDK's ``Session`` protocol structurally (this module
never imports the SDK)::

    session = MemevictSession("user-42", url="redis://localhost:6379", max_tokens=8000)
    result = await Runner.run(agent, "hi", session=session)

Each item is one memory: its JSON is the text, its importance comes from the labeler
(:func:`memevict.importance.rules` by default) and its cost from ``count_tokens`` of
the text the model reads of it (:func:`message_of`). A
``function_call`` (any ``*_call`` item with a ``call_id``) and its output are one group,
and a ``reasoning`` item joins the group of the item after it, so a window never holds
half of either (the Responses API rejects both). The hot tier holds at most
``max_tokens``; what is evicted stays in the cold tier, recallable with the store's
``recall``. ``get_items`` returns the window in time order; ``pop_item`` removes the
newest item of the window; ``clear_session`` drops the namespace.
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
    PIN_AT,
    AsyncConversation,
    Entry,
    TokenCounter,
    approx_tokens,
    open_async_store,
)

Item = dict[str, Any]  # the SDK's TResponseInputItem, a TypedDict


def _text_of(value: object) -> str:
    """The readable text of an item's content or output (a string or a list of parts)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [p.get("text") or p.get("refusal") or "" for p in value if isinstance(p, dict)]
        return "\n".join(p for p in parts if p)
    return ""


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


def whole_tail(items: list[Item], limit: int) -> list[Item]:
    """The last ``limit`` items, fewer if that would start with a tool output whose call
    is cut off: a call and its output are never split."""
    start = max(0, len(items) - limit)
    calls = {call_group(item) for item in items[start:] if str(item.get("type")).endswith("_call")}
    while start < len(items):
        group = call_group(items[start])
        if group is None or not str(items[start].get("type")).endswith("_output"):
            break
        if group in calls:
            break
        start += 1
    return items[start:]


class MemevictSession:
    """An OpenAI Agents SDK session backed by one memevict namespace (``session_id`` by
    default). Give it a ``url`` (a single server or a cluster node) or an open
    ``store``; ``max_tokens`` is the history's token budget; ``policy`` changes any other
    Policy field (see :func:`~memevict.integrations._conversation.conversation_policy`)."""

    def __init__(
        self,
        session_id: str,
        *,
        url: str | None = None,
        store: AsyncMemoryStore | None = None,
        max_tokens: int = 8000,
        namespace: str | None = None,
        labeler: Labeler = rules,
        count_tokens: TokenCounter = approx_tokens,
        pin_at: float = PIN_AT,
        session_settings: Any = None,
        **policy: float | int | str,
    ) -> None:
        self.store = open_async_store(
            "MemevictSession", url, store, namespace or session_id, max_tokens, policy
        )
        self.session_id = session_id
        self.session_settings = session_settings
        self.conversation = AsyncConversation(
            self.store, labeler=labeler, count_tokens=count_tokens, pin_at=pin_at
        )
        self._open_group: str | None = None

    async def get_items(self, limit: int | None = None) -> list[Item]:
        """The window in time order (its last ``limit`` items, a tool call never cut
        from its output)."""
        items = [json.loads(text) for _, text in await self.conversation.window()]
        return items if limit is None else whole_tail(items, limit)

    async def add_items(self, items: list[Item]) -> None:
        """Remembers new items, evicting to the token budget."""
        if not items:
            return
        entries, self._open_group = entries_of(items, self._open_group)
        await self.conversation.add(entries)

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
        return dict(json.loads(text))

    async def clear_session(self) -> None:
        """Deletes the session's namespace, cold tier included."""
        await self.store.drop()
        self._open_group = None

    async def close(self) -> None:
        """Closes the client if the session made it (from ``url``)."""
        await self.store.aclose()
