"""A Pydantic AI history processor that evicts by importance x recency, not FIFO.

Pydantic AI hands a history processor (the ``ProcessHistory`` capability) the run's history
before every model request, sends the list it returns and keeps that list as the run's
history::

    history = MemevictHistory(session_id="user-42", url="redis://localhost:6379", max_tokens=8000)
    agent = Agent(model, capabilities=[ProcessHistory(history)])
    result = await agent.run("hi", message_history=previous.all_messages())

:class:`MemevictHistory` is async (on an :class:`~memevict.aio.AsyncMemoryStore`);
:class:`SyncMemevictHistory` is the same on a :class:`~memevict.MemoryStore` (Pydantic AI
runs a sync processor in a worker thread). On every call the processor remembers the
messages it has not seen yet and returns the memevict window. What it maps:

- *Memories*: each ``ModelMessage`` (a ``ModelRequest`` or a ``ModelResponse``) is one
  memory, in the namespace ``pydantic-ai:<session_id>`` by default. Its text is its JSON
  (``ModelMessagesTypeAdapter``), read back with ``validate_json``. Its id is a sha256: of
  a response's JSON without the fields Pydantic AI may set after a processor has run
  (``run_id``, ``conversation_id``, ``metadata``, ``state``), and of the JSON of a
  request's first part. So the same message always gets the same id, the timestamps in it
  keep repeated words distinct, and a request survives what Pydantic AI does at the start
  of every run: it merges consecutive requests of the history into one (a window often
  holds a request whose response was evicted, then the next request). The processor
  splits such a merge back into the requests it stored, found by their first parts, so
  that each stays one memory.
- *Importance*: the labeler (:func:`memevict.importance.rules` by default) reads a
  :class:`~memevict.importance.Message` of the text of the parts. A request answering tool
  calls is role "tool", kind "function_call_output", ``tool_status`` "error" when one of
  its answers is a failure (a ``ToolReturnPart`` whose ``outcome`` is "failed" or
  "retried", as ``ToolFailed`` and ``ModelRetry`` leave it, or a legacy
  ``RetryPromptPart``) and "success" otherwise; a request holding a system prompt
  (``SystemPromptPart`` of the default "conversation" scope) is role "system"; any other
  request is role "user"; a response is role "assistant", kind "function_call" if it
  calls a tool (shown as ``name(arguments)``). At ``pin_at`` or above (an instruction, by
  the rules) a message is whitelisted: it stays in the prompt however old.
- *Tokens*: ``count_tokens`` of that same text (what the model reads of the message), not
  of its JSON, whose field names, usage counts and timestamps the model never sees.
- *Groups*: a response calling tools and the requests answering its calls (by
  ``tool_call_id``) are one group, ``call:<id of the response>``, kept or evicted together:
  a model API rejects a tool call without its return and a return without its call, and
  Pydantic AI's own repair of such a history drops the return or makes one up.
- *Always sent*: the current turn, which is the last message (the request about to be
  sent), the latest request holding a user prompt (the question being answered) and the
  groups of both; and the first message, if it holds a system prompt (Pydantic AI puts the
  agent's system prompt in the first request of a conversation, and only there). These are
  sent whatever the budget; the window of the rest holds ``max_tokens`` minus their cost.

The output is the window and those messages, in time order. The messages given to the
processor are returned as they are (the same objects); older ones come back from the store.
Evicted messages stay in the cold tier, recallable with the store's ``recall``.

``history.recall_tool()`` is a ``Tool``, ``recall_memory(query)``, for ``Agent(tools=[...])``:
with it the model searches the session's earlier messages itself, evicted ones included.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic

from pydantic import TypeAdapter, ValidationError
from pydantic_ai import Tool
from pydantic_ai.messages import (
    ERROR_OUTCOMES,
    BaseToolCallPart,
    BaseToolReturnPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    RetryFeedbackPart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from memevict.aio import AsyncMemoryStore
from memevict.importance import Labeler, Message, rules
from memevict.integrations._conversation import (
    MAX_TOKENS,
    PIN_AT,
    RECALL_DOC,
    RECALL_K,
    RECALL_TOKENS,
    RECALL_TOOL,
    RECENT,
    TOKEN_WEIGHT,
    AsyncConversation,
    BaseConversation,
    Conversation,
    Entry,
    OnEvicted,
    OnLost,
    Settings,
    Steps,
    StoreT,
    TokenCounter,
    approx_tokens,
    arun_steps,
    check_recall,
    namespace_for,
    open_conversation,
    recent_of,
    run_steps,
    with_groups,
    without,
)
from memevict.registry import AsyncClient, SyncClient
from memevict.store import MemoryStore

__all__ = [
    "MemevictHistory",
    "SyncMemevictHistory",
    "message_id",
    "message_of",
    "read_message",
    "text_of",
]

# Set by Pydantic AI on a request after the history processors have run: not its identity.
_VOLATILE = {"instructions", "run_id", "conversation_id", "metadata", "state"}
_SEEN = 10_000  # message ids whose order (and stored requests) a processor remembers
_PARTS: TypeAdapter[list[ModelRequestPart]] = TypeAdapter(list[ModelRequestPart])


def _args(part: BaseToolCallPart) -> str:
    if isinstance(part.args, dict):
        return json.dumps(part.args, separators=(",", ":"))
    return part.args or ""


def _user_text(part: UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    texts = (c if isinstance(c, str) else getattr(c, "content", None) for c in part.content)
    return "\n".join(t for t in texts if isinstance(t, str) and t)


def _part_text(part: object) -> str:
    """What the model reads of one part (multimodal content aside)."""
    if isinstance(part, UserPromptPart):
        return _user_text(part)
    if isinstance(part, BaseToolReturnPart):
        return part.model_response_str(wrap_if_error=False)
    if isinstance(part, BaseToolCallPart):
        return f"{part.tool_name}({_args(part)})"
    if isinstance(part, RetryPromptPart | RetryFeedbackPart):
        return part.model_response()
    if isinstance(part, SystemPromptPart | TextPart | ThinkingPart):
        return part.content
    return ""


def text_of(message: ModelMessage) -> str:
    """The text of a message's parts: what the labeler reads and ``count_tokens`` counts."""
    return "\n".join(t for t in map(_part_text, message.parts) if t)


def _answers(message: ModelMessage) -> list[str]:
    """The ids of the tool calls a request answers."""
    if not isinstance(message, ModelRequest):
        return []
    return [
        p.tool_call_id
        for p in message.parts
        if isinstance(p, ToolReturnPart)
        or (isinstance(p, RetryPromptPart) and p.tool_name is not None)
    ]


def _failed(message: ModelRequest) -> bool:
    for p in message.parts:
        if isinstance(p, ToolReturnPart) and p.outcome in ERROR_OUTCOMES:
            return True
        if isinstance(p, RetryPromptPart) and p.tool_name is not None:
            return True
    return False


def _has(message: ModelMessage, kind: type[object]) -> bool:
    return any(isinstance(p, kind) for p in message.parts)


def _has_system_prompt(message: ModelMessage) -> bool:
    """Whether a request holds a system prompt (one seen only by its own request aside)."""
    return isinstance(message, ModelRequest) and any(
        isinstance(p, SystemPromptPart) and p.scope == "conversation" for p in message.parts
    )


def message_of(message: ModelMessage) -> Message:
    """What the labeler reads of a message."""
    text = text_of(message)
    if isinstance(message, ModelResponse):
        calls = _has(message, ToolCallPart)
        return Message(text, role="assistant", kind="function_call" if calls else "message")
    if _answers(message):
        status = "error" if _failed(message) else "success"
        return Message(text, role="tool", kind="function_call_output", tool_status=status)
    if _has_system_prompt(message):
        return Message(text, role="system", kind="message")
    return Message(text, role="user", kind="message")


def _json(message: ModelMessage) -> str:
    return ModelMessagesTypeAdapter.dump_json([message]).decode()[1:-1]


def _identity(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _part_ids(message: ModelRequest) -> list[str]:
    """The id each part of a request would have as the first part of one."""
    parts = _PARTS.dump_python(list(message.parts), mode="json")
    return [hashlib.sha256(b"request:" + _identity(p)).hexdigest() for p in parts]


def _head(message: ModelRequest) -> int:
    """The part whose JSON names a request: its first that is not a system prompt (a
    dynamic system prompt is rendered again on every run), else its first."""
    parts = message.parts
    return next((i for i, p in enumerate(parts) if not isinstance(p, SystemPromptPart)), 0)


def message_id(message: ModelMessage) -> str:
    """The memory id of a message: for a request, a sha256 of the JSON of its first part
    that is not a system prompt (which survives Pydantic AI merging consecutive requests
    into one: see :func:`unmerged`, and rendering a dynamic system prompt again); for a
    response, a sha256 of its JSON, the fields set after the processors ran left out."""
    if isinstance(message, ModelRequest) and message.parts:
        return _part_ids(message)[_head(message)]
    identity = ModelMessagesTypeAdapter.dump_json([message], exclude={"__all__": _VOLATILE})
    return hashlib.sha256(identity).hexdigest()


def unmerged(
    messages: Sequence[ModelMessage], stored: Mapping[str, str | None]
) -> list[ModelMessage]:
    """``messages`` with each request that merges stored requests replaced by them.

    At the start of a run Pydantic AI merges consecutive requests (a window often holds a
    request whose response was evicted, followed by the next request) into one new request
    holding their parts. A request is stored under the id of its first part, so a request
    holding the first part of another stored request is such a merge. ``stored``: the
    stored text of the requests by id, None for an id known not to be one (the non-first
    parts of the multi-part requests in ``messages`` are looked up)."""
    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelRequest) and len(message.parts) > 1:
            heads = [id for id in _part_ids(message) if stored.get(id) is not None]
            if len(heads) > 1:
                split = [_read(stored[id] or "") for id in dict.fromkeys(heads)]
                split.sort(key=lambda m: m.timestamp.timestamp() if m.timestamp else -1.0)
                out.extend(split)
                continue
        out.append(message)
    return out


def _lookups(messages: Sequence[ModelMessage]) -> list[str]:
    """The ids to look up for :func:`unmerged`: every part of a multi-part request."""
    return [
        id
        for m in messages
        if isinstance(m, ModelRequest) and len(m.parts) > 1
        for id in _part_ids(m)
    ]


def _read(text: str) -> ModelMessage:
    return ModelMessagesTypeAdapter.validate_json(f"[{text}]")[0]


def _readable(text: str) -> ModelMessage | None:
    """The message of a stored text, or None for one that is not a message (a memory the
    processor did not write: an operator's ``memevict remember``)."""
    try:
        messages = ModelMessagesTypeAdapter.validate_json(f"[{text}]")
    except ValidationError:
        return None
    return messages[0] if len(messages) == 1 else None


# A summariser's callback: the session's namespace and the messages a write evicted, in the
# order they left.
OnEvict = Callable[[str, list[ModelMessage]], object]


def handing_to(on_evict: OnEvict) -> OnEvicted:
    """The conversation's hook for ``on_evict``: the evicted texts read as messages (one
    this processor did not write is left out); nothing when none is one."""

    def handed(namespace: str, left: list[tuple[str, str | None]]) -> object:
        found = [_readable(text) for _, text in left if text is not None]
        messages = [m for m in found if m is not None]
        return on_evict(namespace, messages) if messages else None

    return handed


def read_message(text: str) -> Message | None:
    """What the model reads of a message this processor stored (:func:`message_of`), or
    None for a text that is not one."""
    message = _readable(text)
    return None if message is None else message_of(message)


@dataclass(frozen=True, slots=True)
class _Turn:
    """A history as entries, and which of them are always sent."""

    entries: list[Entry]
    always: list[Entry]  # in time order
    given: dict[str, ModelMessage]


def _turn(messages: Sequence[ModelMessage]) -> _Turn:
    ids = [message_id(m) for m in messages]
    groups: list[str | None] = [None] * len(messages)
    caller: dict[str, int] = {}  # tool_call_id -> the index of the response making the call
    for i, m in enumerate(messages):
        if isinstance(m, ModelResponse):
            for p in m.parts:
                if isinstance(p, ToolCallPart):
                    caller[p.tool_call_id] = i
                    groups[i] = f"call:{ids[i]}"
        else:
            for call_id in _answers(m):
                if call_id in caller:
                    groups[i] = groups[caller[call_id]]
                    break
    entries = [
        Entry(id, _json(m), message_of(m), group)
        for id, m, group in zip(ids, messages, groups, strict=True)
    ]
    keep: set[int] = set()
    if messages:
        keep.add(len(messages) - 1)
        prompts = [
            i
            for i, m in enumerate(messages)
            if isinstance(m, ModelRequest) and _has(m, UserPromptPart)
        ]
        keep.update(prompts[-1:])
        if _has_system_prompt(messages[0]):
            keep.add(0)
    given = dict(zip(ids, messages, strict=True))
    return _Turn(entries, with_groups(entries, keep), given)


class _Order:
    """The order in which this process first saw each message: the time order, as a
    framework passes a history oldest first. A message it has not seen (stored by an
    earlier process) is older than all it has. Bounded: the least recently seen go."""

    def __init__(self) -> None:
        self._seq: OrderedDict[str, int] = OrderedDict()
        self._next = 0

    def see(self, ids: Sequence[str]) -> None:
        for id in ids:
            if id in self._seq:
                self._seq.move_to_end(id)
            else:
                self._seq[id] = self._next
                self._next += 1
        while len(self._seq) > _SEEN:
            self._seq.popitem(last=False)

    def output(
        self, turn: _Turn, window: list[tuple[str, str]], foreign: list[str]
    ) -> list[ModelMessage]:
        """The window's messages in time order: the messages given to the processor as
        they are (the same objects), the others read back from their stored text (the id
        of a text that is not a message goes to ``foreign``, the text left out). By
        their timestamps where all have one (another processor of the session may have
        stored some in between); else one this process has not seen keeps its place in
        the window's order (the order first remembered) after the one before it. The
        history's last message (the request being made) comes last whatever another
        worker of the session stored meanwhile: the model answers it."""
        read = {id: _readable(text) for id, text in window if id not in turn.given}
        foreign += [id for id, message in read.items() if message is None]
        known = {id: m for id, m in read.items() if m is not None} | turn.given
        window = [(id, text) for id, text in window if id in known]
        messages = [known[id] for id, _ in window]
        times = [m.timestamp for m in messages]
        if all(t is not None for t in times):
            at = {id(m): t.timestamp() for m, t in zip(messages, times, strict=True) if t}
            ordered = sorted(messages, key=lambda m: at[id(m)])
        else:
            placed: list[tuple[int, int, ModelMessage]] = []
            anchor = -1
            for at_, ((key, _), message) in enumerate(zip(window, messages, strict=True)):
                seen = self._seq.get(key)
                if seen is not None:
                    anchor = seen
                placed.append((anchor, at_ if seen is None else -1, message))
            placed.sort(key=lambda p: (p[0], p[1]))
            ordered = [m for _, _, m in placed]
        last = turn.given[turn.entries[-1].id] if turn.entries else None
        if last is not None and ordered and ordered[-1] is not last and last in ordered:
            ordered = [m for m in ordered if m is not last] + [last]
        return ordered


class _Requests:
    """The stored text of requests by id (None: not a request's id), for :func:`unmerged`.
    Bounded: the least recently used go, and are looked up again."""

    def __init__(self) -> None:
        self.texts: OrderedDict[str, str | None] = OrderedDict()

    def missing(self, messages: Sequence[ModelMessage]) -> list[str]:
        return [id for id in dict.fromkeys(_lookups(messages)) if id not in self.texts]

    def set(self, id: str, text: str | None) -> None:
        self.texts[id] = text
        self.texts.move_to_end(id)
        while len(self.texts) > _SEEN:
            self.texts.popitem(last=False)


class _Base(Generic[StoreT]):
    def __init__(
        self, conversation: BaseConversation[StoreT], session_id: str, recent: int
    ) -> None:
        self.session_id = session_id
        self.recent = recent
        self.conversation: BaseConversation[StoreT] = conversation
        self.store: StoreT = conversation.store
        self.namespace = self.store.namespace
        self._order, self._requests = _Order(), _Requests()

    def _turn(self, messages: Sequence[ModelMessage]) -> _Turn:
        """The entries of a history whose merged requests were split (their parts looked up)."""
        turn = _turn(unmerged(messages, self._requests.texts))
        self._order.see([e.id for e in turn.entries])
        for entry in turn.entries:
            if isinstance(turn.given[entry.id], ModelRequest):
                self._requests.set(entry.id, entry.text)
        return turn

    def _steps(self, messages: list[ModelMessage]) -> Steps[list[ModelMessage]]:
        """The steps of ``__call__``."""
        if not messages:
            return messages
        for id in self._requests.missing(messages):
            memory = yield from self.conversation.get_steps(id)
            self._requests.set(id, None if memory is None else memory.text)
        turn = self._turn(messages)
        # The new entries not always sent are remembered before the window is read, the
        # always-sent ones after it (see Conversation.turn).
        history = without(turn.entries, turn.always)
        recent = recent_of(history, self.recent)
        window = yield from self.conversation.turn_steps(history, turn.always, recent, None)
        foreign: list[str] = []
        output = self._order.output(turn, window, foreign)
        self.conversation.note_foreign(foreign)
        return output

    def _cleared(self) -> None:
        """After the namespace was dropped: the conversation and what was seen, anew."""
        self.conversation = self.conversation.fresh()
        self._order, self._requests = _Order(), _Requests()


class MemevictHistory(_Base[AsyncMemoryStore]):
    """A Pydantic AI history processor on an :class:`~memevict.aio.AsyncMemoryStore`:
    ``Agent(model, capabilities=[ProcessHistory(MemevictHistory("user-42", url=...))])``.

    One of ``url`` (a single server or a cluster node; the processor owns that client),
    ``client`` (shared by any number of processors) or ``store`` (its namespace is used);
    the namespace is ``pydantic-ai:<session_id>`` (hashed where the id has characters a
    namespace cannot take) unless ``namespace`` names one. ``max_tokens`` is the token
    budget of what the model is sent (0: none; the current turn is sent even when it alone
    exceeds it), in which the ``recent`` messages before it are sent whatever their rank
    (while they fit, a group whole); it and any other Policy field given in ``policy``
    are applied to the namespace when its stored policy differs. ``on_lost`` is called
    with the namespace when the processor finds it lost (a restart without persistence,
    a FLUSHDB): the messages it was given are then stored again; raise from it to fail
    that model request. ``recall_share``: the share of the budget that earlier messages
    matching the latest user message fill, evicted ones included (None: about 1,000
    tokens, at most half; 0: none, and the namespace keeps no index).
    ``token_weight``: how far a message longer than 25 tokens ranks by its importance per
    token (0: by importance alone; default 0.35; see docs/adapters.md). ``on_evict`` is
    called (and awaited, if it returns an awaitable) with the namespace and the messages
    each request's writes evicted from the hot tier, as they left: each eviction once,
    whichever of several workers on the session made it (for a summariser of what leaves;
    it runs inside the request: start slow work as a task of its own; an exception from it
    is logged and the request goes on)."""

    conversation: AsyncConversation

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
        on_evict: OnEvict | None = None,
        **policy: float | int | str,
    ) -> None:
        opened = open_conversation(
            AsyncConversation,
            "MemevictHistory",
            namespace or namespace_for("pydantic-ai", session_id),
            Settings(
                max_tokens,
                policy,
                labeler,
                count_tokens,
                pin_at,
                on_lost,
                recall_share,
                token_weight,
                None if on_evict is None else handing_to(on_evict),
            ),
            url=url,
            client=client,
            store=store,
        )
        super().__init__(opened, session_id, recent)

    @classmethod
    def from_url(cls, session_id: str, url: str, **kwargs: Any) -> MemevictHistory:
        """A processor on a client of its own of ``url`` (closed by :meth:`aclose`)."""
        return cls(session_id, url=url, **kwargs)

    async def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """Remembers the messages not seen yet; returns the window, current turn included."""
        return await arun_steps(self._steps(messages))

    def recall_tool(self, *, k: int = RECALL_K, max_tokens: int = RECALL_TOKENS) -> Tool[Any]:
        """The tool ``recall_memory(query)`` for ``Agent(tools=[...])``: the session's ``k``
        messages, evicted ones included, that best match the words of the model's query,
        as text of at most ``max_tokens`` tokens (``count_tokens``), oldest first."""
        check_recall(k, max_tokens)

        async def recall_memory(query: str) -> str:
            conversation = self.conversation  # (a new one after clear_session)
            return await conversation.recall_memory(query, read_message, k=k, max_tokens=max_tokens)

        recall_memory.__doc__ = RECALL_DOC
        return Tool(recall_memory, takes_ctx=False, name=RECALL_TOOL)

    async def clear_session(self) -> None:
        """Deletes the session's namespace, cold tier included."""
        await self.store.drop()
        self._cleared()

    async def aclose(self) -> None:
        """Closes the client if the processor made it (from ``url``)."""
        await self.store.aclose()


class SyncMemevictHistory(_Base[MemoryStore]):
    """:class:`MemevictHistory` on a :class:`~memevict.MemoryStore` (a sync processor);
    the same arguments, with a ``redis.Redis`` client or a :class:`~memevict.MemoryStore`
    (and an ``on_evict`` that returns no awaitable)."""

    conversation: Conversation

    def __init__(
        self,
        session_id: str,
        *,
        url: str | None = None,
        client: SyncClient | None = None,
        store: MemoryStore | None = None,
        max_tokens: int = MAX_TOKENS,
        namespace: str | None = None,
        labeler: Labeler = rules,
        count_tokens: TokenCounter = approx_tokens,
        pin_at: float = PIN_AT,
        recent: int = RECENT,
        on_lost: OnLost | None = None,
        recall_share: float | None = None,
        token_weight: float = TOKEN_WEIGHT,
        on_evict: OnEvict | None = None,
        **policy: float | int | str,
    ) -> None:
        opened = open_conversation(
            Conversation,
            "SyncMemevictHistory",
            namespace or namespace_for("pydantic-ai", session_id),
            Settings(
                max_tokens,
                policy,
                labeler,
                count_tokens,
                pin_at,
                on_lost,
                recall_share,
                token_weight,
                None if on_evict is None else handing_to(on_evict),
            ),
            url=url,
            client=client,
            store=store,
        )
        super().__init__(opened, session_id, recent)

    @classmethod
    def from_url(cls, session_id: str, url: str, **kwargs: Any) -> SyncMemevictHistory:
        """A processor on a client of its own of ``url`` (closed by :meth:`close`)."""
        return cls(session_id, url=url, **kwargs)

    def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """See :meth:`MemevictHistory.__call__`."""
        return run_steps(self._steps(messages))

    def recall_tool(self, *, k: int = RECALL_K, max_tokens: int = RECALL_TOKENS) -> Tool[Any]:
        """See :meth:`MemevictHistory.recall_tool` (the tool runs in a worker thread)."""
        check_recall(k, max_tokens)

        def recall_memory(query: str) -> str:
            conversation = self.conversation  # (a new one after clear_session)
            return conversation.recall_memory(query, read_message, k=k, max_tokens=max_tokens)

        recall_memory.__doc__ = RECALL_DOC
        return Tool(recall_memory, takes_ctx=False, name=RECALL_TOOL)

    def clear_session(self) -> None:
        """Deletes the session's namespace, cold tier included."""
        self.store.drop()
        self._cleared()

    def close(self) -> None:
        """Closes the client if the processor made it (from ``url``)."""
        self.store.close()
