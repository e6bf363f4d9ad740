"""Agent middleware for LangChain v1 that evicts by importance x recency, not FIFO.

``MemevictMiddleware`` is an ``AgentMiddleware`` for ``langchain.agents.create_agent``::

    agent = create_agent(
        model,
        tools=[lookup],
        system_prompt="You are a clerk.",
        middleware=[MemevictMiddleware(url="redis://localhost:6379", max_tokens=8000)],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "42"}})

Before every model call it remembers the request's new messages and sends the model the
memevict window in their place (``wrap_model_call`` and ``awrap_model_call``). The
system message and the graph state are left alone: the state keeps the whole
conversation, only what the model is sent is trimmed.

What it maps:

- *A message is one memory*, by its ``id`` (the agent state gives every message one; a
  message without one gets ``sha256:`` and the hash of its text, so identical id-less
  messages are one memory). Its text is the JSON of ``message_to_dict(message)``
  (:func:`text_of`); its cost is ``count_tokens`` of what the model reads of it (the
  text :func:`message_of` gives the labeler), not of that JSON.
- *Importance* comes from the labeler (:func:`memevict.importance.rules` by default),
  which reads (:func:`message_of`) the message's text with role "user" (human),
  "assistant" (AI), "tool", "system" or a ``ChatMessage``'s role; an AI message with tool
  calls has kind "function_call" and its calls in its text, a ``ToolMessage`` kind
  "function_call_output" and its ``status`` as ``tool_status`` (so ``status="error"`` is a
  tool error). A message at ``pin_at`` or above (an instruction, by the rules) is
  whitelisted: it stays in the prompt however old.
- *Links*: an AI message with tool calls and the ``ToolMessage``s answering them (by
  ``tool_call_id``) are one group, ``ai:<message id>``, kept or evicted together, so the
  model is never sent a tool call without its result or a result without its call.
- *The namespace*: one per thread, ``langchain:<thread_id>`` (``langchain:default``
  without a thread id), unless ``namespace`` names one for all threads.

The current turn is always sent, never trimmed: the last message and, if it is a
``ToolMessage``, its whole group (the AI message and all its ``ToolMessage``s). The
history before it gets what the current turn leaves of ``max_tokens``: the
highest-ranked whole groups that fit, in time order. So the messages sent (the system
message aside) cost at most ``max_tokens``, or only the current turn if it alone costs
more. A message of the window that is not in the request (removed from the state, or of
another thread in a shared namespace) is not sent, nor is a tool call or result whose
other half is not sent. The evicted stay in the cold tier, recallable.

``middleware.recall_tool()`` is a tool, ``recall_memory(query)``, for ``create_agent``'s
``tools``: with it the model searches the earlier messages of its thread itself, evicted
ones included.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Container, Sequence
from typing import Any, Generic, TypeVar

import redis.asyncio
from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ContextT,
    ModelRequest,
    ModelResponse,
    ResponseT,
)
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.config import get_config
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from memevict.aio import AsyncMemoryStore
from memevict.clients import async_client_from_url, async_routed, client_from_url, close_client
from memevict.commands import MAX_GROUP_BYTES, MAX_ID_BYTES, check_namespace
from memevict.errors import BadArgument
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
    Conversation,
    ConversationT,
    Entry,
    OnEvicted,
    OnLost,
    Settings,
    Steps,
    StoreT,
    TokenCounter,
    approx_tokens,
    arun_steps,
    check_one_of,
    check_recall,
    conversation_policy,
    fits,
    hashed_name,
    namespace_for,
    recent_of,
    run_steps,
    sha256_of,
    without,
)
from memevict.registry import AsyncClient, SyncClient
from memevict.store import MemoryStore

DEFAULT_NAMESPACE = "langchain:default"
_CONVERSATIONS = 1024  # namespaces whose Conversation a middleware keeps open

M = TypeVar("M", bound=BaseMessage)


def text_of(message: BaseMessage) -> str:
    """The text remembered for ``message``: the JSON of ``message_to_dict(message)``, from
    which ``messages_from_dict`` rebuilds it."""
    return json.dumps(message_to_dict(message), separators=(",", ":"), default=str)


def id_of(message: BaseMessage, text: str | None = None) -> str:
    """The memory id of ``message``: its ``id``, or ``sha256:`` and the hash of its text
    when it has none (or one memevict cannot take)."""
    if isinstance(message.id, str) and fits(message.id, MAX_ID_BYTES):
        return message.id
    return "sha256:" + sha256_of(text_of(message) if text is None else text)


def stored_message(text: str) -> BaseMessage | None:
    """The message this adapter stored as ``text`` (:func:`text_of`; ``messages_from_dict``
    rebuilds it), or None for a text that is not one (an operator's memory)."""
    try:
        return messages_from_dict([json.loads(text)])[0]
    except (ValueError, KeyError, TypeError):  # (not JSON, not a message's dict)
        return None


def read_message(text: str) -> Message | None:
    """What the model reads of a message this adapter stored (:func:`message_of` of
    :func:`stored_message`), or None for a text that is not one."""
    message = stored_message(text)
    return None if message is None else message_of(message)


# A summariser's callback: a thread's namespace and the messages a write of it evicted, in
# the order they left.
OnEvict = Callable[[str, list[BaseMessage]], object]


def handing_to(on_evict: OnEvict) -> OnEvicted:
    """The conversation's hook for ``on_evict``: the evicted texts read as messages (one
    that is not a message of this adapter's is left out); nothing when none is one."""

    def handed(namespace: str, left: list[tuple[str, str | None]]) -> object:
        found = [stored_message(text) for _, text in left if text is not None]
        messages = [m for m in found if m is not None]
        return on_evict(namespace, messages) if messages else None

    return handed


def _calls(message: AIMessage) -> list[str]:
    """The ids of the tool calls of an AI message, the invalid ones too (the agent answers
    those with an error ``ToolMessage``)."""
    ids = [call["id"] for call in message.tool_calls]
    ids += [call["id"] for call in message.invalid_tool_calls]
    return [id for id in ids if id]


def message_of(message: BaseMessage) -> Message:
    """What the labeler reads of a message."""
    text = str(message.text)
    if isinstance(message, AIMessage):
        calls = [f"{c['name']}({json.dumps(c['args'], default=str)})" for c in message.tool_calls]
        calls += [f"{c['name'] or ''}({c['args'] or ''})" for c in message.invalid_tool_calls]
        if calls:
            return Message("\n".join([text, *calls]).strip(), "assistant", "function_call")
        return Message(text, "assistant")
    if isinstance(message, ToolMessage):
        return Message(text, "tool", "function_call_output", message.status)
    if isinstance(message, FunctionMessage):
        return Message(text, "function", "function_call_output")
    if isinstance(message, HumanMessage):
        return Message(text, "user")
    if isinstance(message, SystemMessage):
        return Message(text, "system")
    if isinstance(message, ChatMessage):
        return Message(text, message.role)
    return Message(text, message.type)


def group_of(ai_id: str) -> str:
    """The group of an AI message with tool calls and of its ``ToolMessage``s:
    ``ai:<id>``, or ``ai:sha256:<hex of the id>`` (see
    :func:`~memevict.integrations._conversation.hashed_name`)."""
    return hashed_name("ai:", ai_id, lambda group: fits(group, MAX_GROUP_BYTES))


def digest_of(message: BaseMessage) -> object:
    """What changes when a message of the graph state is edited under its id (its
    content, tool calls or status), cheaply: the message is then remembered again, with
    its new cost."""
    calls = message.tool_calls if isinstance(message, AIMessage) else None
    status = message.status if isinstance(message, ToolMessage) else None
    return hash((message.type, str(message.content), repr(calls) if calls else "", status))


def _as_known(known: Container[str], id: str, message: BaseMessage) -> bool:
    """Whether ``message`` is ``known`` as it is (a mapping of ids to digests: with the
    same digest)."""
    if id not in known:
        return False
    get = getattr(known, "get", None)
    return get is None or get(id) == digest_of(message)


def entries_of(
    messages: Sequence[M], known: Container[str] = (), recent: int = 1
) -> tuple[list[Entry], dict[str, M]]:
    """The entries of ``messages`` in order, and the message of each id (of messages with
    the same id, the last). A message ``known`` as it is (remembered already, with the
    same :func:`digest_of` where ``known`` maps ids to digests) gets no entry, unless it
    is of the current turn or of the last ``recent``: only the new, the edited, the
    recent and the current are serialized."""
    ids = [id_of(m) for m in messages]
    call_group: dict[str, str] = {}  # tool_call_id -> the group of its AI message
    for message, id in zip(messages, ids, strict=True):
        if isinstance(message, AIMessage):
            for call in _calls(message):
                call_group.setdefault(call, group_of(id))
    groups: list[str | None] = []
    for message, id in zip(messages, ids, strict=True):
        if isinstance(message, AIMessage) and _calls(message):
            groups.append(group_of(id))
        elif isinstance(message, ToolMessage):
            groups.append(call_group.get(message.tool_call_id))
        else:
            groups.append(None)
    last = messages[-1] if messages else None
    current = groups[-1] if isinstance(last, ToolMessage) else None
    by_id = {id: message for id, message in zip(ids, messages, strict=True)}
    at = {id: i for i, id in enumerate(ids)}
    entries = [
        Entry(id, text_of(message), message_of(message), group, digest_of(message))
        for i, (message, id, group) in enumerate(zip(messages, ids, groups, strict=True))
        if at[id] == i
        and (
            not _as_known(known, id, message)
            or i >= len(messages) - recent
            or (current and group == current)
        )
    ]
    return entries, by_id


def current_turn(entries: Sequence[Entry]) -> list[Entry]:
    """The current turn (always sent): the last entry and, if it is a tool result, the
    rest of its group (its AI message and the other results)."""
    if not entries:
        return []
    last = entries[-1]
    if last.message.kind != "function_call_output" or last.group is None:
        return [last]
    return [e for e in entries if e.group == last.group]


def whole_pairs(messages: Sequence[M], keep: Sequence[M] = ()) -> list[M]:
    """``messages`` without a tool call whose results are not all there nor a tool result
    whose call is not there; the messages of ``keep`` stay whatever they lack."""
    kept = {id(m) for m in keep}
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    calls: set[str] = set()  # the tool calls of the AI messages that stay
    out: list[M] = []
    for message in messages:
        if isinstance(message, AIMessage):
            ids = _calls(message)
            if id(message) not in kept and not answered.issuperset(ids):
                continue
            calls.update(ids)
        out.append(message)
    return [
        m for m in out if not isinstance(m, ToolMessage) or m.tool_call_id in calls or id(m) in kept
    ]


def thread_id_of(request: ModelRequest[ContextT]) -> str | None:
    """The thread id of the run: the runtime's, else the config's ``thread_id``."""
    info = getattr(request.runtime, "execution_info", None)
    thread = getattr(info, "thread_id", None)
    if thread is None:
        try:
            configurable = get_config().get("configurable") or {}
        except RuntimeError:  # outside a run (or in a task on Python 3.10)
            return None
        thread = configurable.get("thread_id")
    return None if thread is None else str(thread)


def foreign(window: Sequence[tuple[str, str]], by_id: Container[str]) -> list[str]:
    """The ids of the window that are not a message this adapter stored (an operator's
    ``memevict remember``): not in the request, and not a message's JSON."""
    return [id for id, text in window if id not in by_id and not text.startswith('{"type":')]


def _sent(
    window: Sequence[tuple[str, str]], tail: Sequence[Entry], by_id: dict[str, AnyMessage]
) -> list[AnyMessage]:
    """The request's messages that the window names, in its order, pairs whole."""
    sent = [by_id[id] for id, _ in window if id in by_id]
    return whole_pairs(sent, [by_id[e.id] for e in tail])


class _Cache(Generic[ConversationT]):
    """The open conversations of a middleware, by namespace, the least recently used
    dropped past ``_CONVERSATIONS`` (its store reopens on the next call)."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, ConversationT] = OrderedDict()

    def get(self, namespace: str) -> ConversationT | None:
        found = self._items.get(namespace)
        if found is not None:
            self._items.move_to_end(namespace)
        return found

    def put(self, namespace: str, conversation: ConversationT) -> ConversationT:
        self._items[namespace] = conversation
        while len(self._items) > _CONVERSATIONS:
            self._items.popitem(last=False)
        return conversation

    def drop(self, namespace: str) -> None:
        self._items.pop(namespace, None)

    def clear(self) -> None:
        self._items.clear()


class MemevictMiddleware(AgentMiddleware[AgentState[ResponseT], ContextT, ResponseT]):
    """Sends the model the memevict window of the conversation instead of all of it.

    One namespace per thread, ``langchain:<thread_id>`` (hashed where the id has
    characters a namespace cannot take), unless ``session_id`` names one session
    (``langchain:<session_id>``) or ``namespace`` one namespace for every thread. Give it
    one of ``url`` (a single server or a cluster node; the middleware makes and owns its
    clients, sync for ``invoke`` and asyncio for ``ainvoke``: :meth:`close`,
    :meth:`aclose`), ``client`` (a ``redis.Redis``/``RedisCluster`` for ``invoke``, or a
    ``redis.asyncio`` one for ``ainvoke``, shared by any number of middlewares and
    threads) or ``store`` (a :class:`~memevict.MemoryStore` or
    :class:`~memevict.aio.AsyncMemoryStore`: its namespace, for every thread).
    ``max_tokens`` is the budget of the messages sent (0: none), in which the ``recent``
    messages before the current turn are sent whatever their rank (while they fit, a
    tool call and its results whole); it and any other Policy
    field given in ``policy`` are applied to a namespace whose stored policy differs.
    ``labeler``, ``count_tokens`` and ``pin_at`` as for
    :class:`~memevict.integrations._conversation.Conversation`. ``on_lost`` is called
    with a thread's namespace when the middleware finds it lost (a restart without
    persistence, a FLUSHDB): the messages of the request are then stored again; raise
    from it to fail that model call. ``recall_share``: the share of the budget that
    earlier messages matching the latest user message fill, evicted ones included (None:
    about 1,000 tokens, at most half; 0: none, and the namespace keeps no index).
    ``token_weight``: how far a message longer than 25 tokens ranks by its importance per
    token (0: by importance alone; default 0.35; see docs/adapters.md). ``on_evict`` is
    called with a thread's namespace and the messages a model call's writes evicted from
    its hot tier, as they left: each eviction once, whichever of several workers on the
    thread made it (for a summariser of what leaves). Under ``ainvoke`` it may be async
    (it is awaited); under ``invoke`` it must not be. It runs inside the model call: start
    slow work as a task of its own; an exception from it is logged and the call goes on."""

    def __init__(
        self,
        session_id: str | None = None,
        *,
        url: str | None = None,
        client: SyncClient | AsyncClient | None = None,
        store: MemoryStore | AsyncMemoryStore | None = None,
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
        super().__init__()
        self.on_lost = on_lost
        self.on_evict = on_evict
        self.recall_share = recall_share
        self.token_weight = token_weight
        self.recent = recent
        check_one_of("MemevictMiddleware", url, client, store)
        self.url = url
        if store is not None:
            namespace = store.namespace
        elif namespace is None and session_id is not None:
            namespace = namespace_for("langchain", session_id)
        self.namespace = None if namespace is None else check_namespace(namespace)
        self.max_tokens, self.policy_fields = max_tokens, policy
        self.policy = conversation_policy(max_tokens, **policy)
        self.labeler, self.count_tokens, self.pin_at = labeler, count_tokens, pin_at
        self._client: SyncClient | None = None
        self._async_client: AsyncClient | None = None
        self._owns_client = self._owns_async_client = False
        if isinstance(client, redis.asyncio.Redis | AsyncRedisCluster):
            self._async_client = client
        elif client is not None:
            self._client = client
        self._routing: asyncio.Future[AsyncClient] | None = None
        self._lock = threading.Lock()
        self._conversations: _Cache[Conversation] = _Cache()
        self._async_conversations: _Cache[AsyncConversation] = _Cache()
        self._store = store

    @classmethod
    def from_url(
        cls, session_id: str | None, url: str, **kwargs: Any
    ) -> MemevictMiddleware[ResponseT, ContextT]:
        """A middleware on clients of its own of ``url``; ``session_id`` None for one
        namespace per thread."""
        return cls(session_id, url=url, **kwargs)

    def namespace_of(self, request: ModelRequest[ContextT]) -> str:
        """The namespace of the request's thread."""
        return self.thread_namespace(thread_id_of(request))

    def thread_namespace(self, thread_id: str | None) -> str:
        """The namespace of a thread (of the session, with ``session_id`` or ``namespace``)."""
        if self.namespace is not None:
            return self.namespace
        return DEFAULT_NAMESPACE if thread_id is None else namespace_for("langchain", thread_id)

    # --- stores ---------------------------------------------------------------------

    def _sync_client(self) -> SyncClient:
        if self._client is None:
            if self.url is None:
                raise BadArgument(
                    "MemevictMiddleware has no sync client for invoke: give it a redis.Redis "
                    "client, a MemoryStore or a url"
                )
            self._client, self._owns_client = client_from_url(self.url), True
        return self._client

    def _conversation(self, store: StoreT) -> Any:
        kind = Conversation if isinstance(store, MemoryStore) else AsyncConversation
        settings = Settings(
            self.max_tokens,
            self.policy_fields,
            self.labeler,
            self.count_tokens,
            self.pin_at,
            self.on_lost,
            self.recall_share,
            self.token_weight,
            None if self.on_evict is None else handing_to(self.on_evict),
        )
        return kind(store, settings)

    def conversation(self, namespace: str) -> Conversation:
        """The conversation of ``namespace`` (its store opened on first use)."""
        with self._lock:
            found = self._conversations.get(namespace)
            if found is None:
                if isinstance(self._store, MemoryStore) and namespace == self._store.namespace:
                    store = self._store
                else:
                    client = self._sync_client()
                    store = MemoryStore(
                        client, namespace, self.policy, adopt_policy=True, cached_open=True
                    )
                found = self._conversations.put(namespace, self._conversation(store))
            return found

    async def _routed_async_client(self) -> AsyncClient:
        if self._async_client is None:
            if self.url is None:
                raise BadArgument(
                    "MemevictMiddleware has no asyncio client for ainvoke: give it a "
                    "redis.asyncio client, an AsyncMemoryStore or a url"
                )
            if self._routing is None:
                self._routing = asyncio.ensure_future(
                    async_routed(async_client_from_url(self.url), self.url)
                )
            try:
                client = await self._routing
            except BaseException:
                self._routing = None  # the next call tries again
                raise
            if self._async_client is None:
                self._async_client, self._owns_async_client = client, True
        return self._async_client

    async def aconversation(self, namespace: str) -> AsyncConversation:
        """The async conversation of ``namespace`` (its store opened on first use)."""
        found = self._async_conversations.get(namespace)
        if found is None:
            if isinstance(self._store, AsyncMemoryStore) and namespace == self._store.namespace:
                store = self._store
            else:
                client = await self._routed_async_client()
                store = AsyncMemoryStore(
                    client, namespace, self.policy, adopt_policy=True, cached_open=True
                )
            found = self._async_conversations.get(namespace)  # (made while we waited?)
            if found is None:
                found = self._async_conversations.put(namespace, self._conversation(store))
        return found

    def clear_session(self, thread_id: str | None = None) -> None:
        """Deletes the namespace of ``thread_id`` (of the session, with ``session_id`` or
        ``namespace``), cold tier included. The graph state is the checkpointer's."""
        namespace = self.thread_namespace(thread_id)
        self.conversation(namespace).store.drop()
        with self._lock:
            self._conversations.drop(namespace)

    async def aclear_session(self, thread_id: str | None = None) -> None:
        """See :meth:`clear_session`."""
        namespace = self.thread_namespace(thread_id)
        await (await self.aconversation(namespace)).store.drop()
        self._async_conversations.drop(namespace)

    def recall_tool(self, *, k: int = RECALL_K, max_tokens: int = RECALL_TOKENS) -> BaseTool:
        """The tool ``recall_memory(query)`` for ``create_agent(tools=[...])``: the ``k``
        messages of the run's thread (its namespace), evicted ones included, that best
        match the words of the model's query, as text of at most ``max_tokens`` tokens
        (``count_tokens``), oldest first. ``invoke`` and ``ainvoke`` as the agent's."""
        check_recall(k, max_tokens)

        def namespace(config: RunnableConfig) -> str:
            thread = (config.get("configurable") or {}).get("thread_id")
            return self.thread_namespace(None if thread is None else str(thread))

        def recall_memory(query: str, config: RunnableConfig) -> str:
            conversation = self.conversation(namespace(config))
            return conversation.recall_memory(query, read_message, k=k, max_tokens=max_tokens)

        async def arecall_memory(query: str, config: RunnableConfig) -> str:
            conversation = await self.aconversation(namespace(config))
            return await conversation.recall_memory(query, read_message, k=k, max_tokens=max_tokens)

        recall_memory.__doc__ = RECALL_DOC
        return StructuredTool.from_function(
            recall_memory, arecall_memory, name=RECALL_TOOL, parse_docstring=True
        )

    def close(self) -> None:
        """Closes the sync client if the middleware made it (from ``url``)."""
        with self._lock:
            if self._owns_client and self._client is not None:
                close_client(self._client)
                self._client, self._owns_client = None, False
            self._conversations.clear()

    async def aclose(self) -> None:
        """Closes the async client if the middleware made it (from ``url``)."""
        if self._owns_async_client and self._async_client is not None:
            client, self._async_client, self._owns_async_client = self._async_client, None, False
            self._routing = None
            self._async_conversations.clear()
            await client.aclose()

    # --- the model call -------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], ModelResponse[ResponseT]],
    ) -> ModelResponse[ResponseT]:
        """Sends the model the window (the current turn and the history that fits)."""
        if not request.messages:
            return handler(request)
        conversation = self.conversation(self.namespace_of(request))
        messages = run_steps(self._turn_steps(request, conversation))
        return handler(request.override(messages=messages))

    async def awrap_model_call(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], Awaitable[ModelResponse[ResponseT]]],
    ) -> ModelResponse[ResponseT]:
        """See :meth:`wrap_model_call`."""
        if not request.messages:
            return await handler(request)
        conversation = await self.aconversation(self.namespace_of(request))
        messages = await arun_steps(self._turn_steps(request, conversation))
        return await handler(request.override(messages=messages))

    def _turn_steps(
        self, request: ModelRequest[ContextT], conversation: Conversation | AsyncConversation
    ) -> Steps[list[AnyMessage]]:
        """The messages to send the model: the current turn and the window of the rest."""
        entries, by_id = entries_of(request.messages, conversation.known, self.recent + 1)
        tail = current_turn(entries)
        history = without(entries, tail)

        def again() -> list[Entry]:  # the whole history (when the namespace was lost)
            return without(entries_of(request.messages)[0], tail)

        recent = recent_of(history, self.recent)
        window = yield from conversation.turn_steps(history, tail, recent, again)
        conversation.note_foreign(foreign(window, by_id))
        return _sent(window, tail, by_id)
