"""MemevictMiddleware under a real LangChain v1 agent, with a scripted chat model (no network).

A 200-turn conversation with tool calls (some failing) runs through ``create_agent`` with a
checkpointer and a small token budget. Every message list the model is sent is checked: the
system prompt first, no tool call without its results or result without its call, the
messages within the budget (the current turn aside, as the middleware documents), and the
user's standing instruction from turn 0 still there at the end. The same conversation
through a FIFO trimming of the same budget loses it.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
import redis
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from memevict import MemoryStore
from memevict.importance import rules
from memevict.integrations._conversation import PIN_AT, approx_tokens
from memevict.integrations.langchain import (
    MemevictMiddleware,
    entries_of,
    message_of,
    whole_pairs,
)
from tests.cluster import Cluster
from tests.servers import Server

TURNS = 200
TURNS_ASYNC = 40
BUDGET = 900  # tokens of messages sent: a dozen or so
INSTRUCTION = "From now on, always answer in French and sign as Bob."
SYSTEM = "You are a clerk."


class ScriptedModel(BaseChatModel):
    """Answers by the last message: a user message asking to look an order up gets a tool
    call, anything else a reply. Records every message list it is sent."""

    sent: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.sent.append(list(messages))
        n = len(self.sent)
        last = messages[-1]
        asked = re.search(r"lookup order (\d+)", last.text)
        if isinstance(last, HumanMessage) and asked:
            call = {"name": "lookup", "args": {"q": f"order {asked[1]}"}, "id": f"call-{n}"}
            reply = AIMessage(content="", tool_calls=[call])
        else:
            reply = AIMessage(content=f"Noted, reply {n}.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _lookup(q: str) -> str:
    """Looks an order up."""
    n = int(q.split()[-1])
    if n % 5 == 0:
        raise ToolException(f"lookup failed: connection refused for {q}")
    return f"order {n}: shipped, " + "details " * 20


lookup = StructuredTool.from_function(_lookup, name="lookup", handle_tool_error=True)


class FifoMiddleware(AgentMiddleware):
    """The comparison: sends the newest messages that fit in the same budget (what FIFO
    trimming to a token budget keeps), pairs kept whole as memevict does."""

    def __init__(self, budget: int) -> None:
        super().__init__()
        self.budget = budget

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse]
    ) -> ModelResponse:
        kept: list[Any] = []
        used = 0
        for message in reversed(request.messages):
            used += approx_tokens(message_of(message).text)
            if used > self.budget:
                break
            kept.insert(0, message)
        return handler(request.override(messages=whole_pairs(kept)))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        raise NotImplementedError


def _lookups(turns: range) -> int:
    return sum("lookup" in _user(turn) for turn in turns)


HUGE_AT, FLUSH_AT = 51, 120  # a message over the whole budget; the server flushed


def _user(turn: int) -> str:
    if turn == 0:
        return INSTRUCTION
    if turn == HUGE_AT:
        return "Here is the whole log: " + "line of the log " * BUDGET  # ~4x the budget
    if turn % 2 == 0:
        return f"Please lookup order {turn} for me."
    return f"ok thanks, turn {turn}"


def _agent(model: ScriptedModel, middleware: AgentMiddleware) -> Any:
    return create_agent(
        model=model,
        tools=[lookup],
        system_prompt=SYSTEM,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


def _config(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


def _tokens(messages: Sequence[BaseMessage]) -> int:
    return sum(approx_tokens(message_of(m).text) for m in messages)


def _current_turn(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The middleware's rule: the last message and, if it is a tool result, its AI message
    and the AI message's other results."""
    last = messages[-1]
    if not isinstance(last, ToolMessage):
        return [last]
    ai = next(
        m
        for m in messages
        if isinstance(m, AIMessage)
        and m.tool_calls
        and last.tool_call_id in {c["id"] for c in m.tool_calls}
    )
    calls = {c["id"] for c in ai.tool_calls}
    return [
        m for m in messages if m is ai or (isinstance(m, ToolMessage) and m.tool_call_id in calls)
    ]


def _check(sent: list[BaseMessage]) -> list[BaseMessage]:
    """Checks one model call; returns its messages after the system prompt."""
    assert isinstance(sent[0], SystemMessage) and sent[0].text == SYSTEM, sent[0]
    messages = sent[1:]
    assert not any(isinstance(m, SystemMessage) for m in messages)
    calls = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    results = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    assert sorted(calls, key=str) == sorted(results, key=str), messages  # pairs whole
    tail = _current_turn(messages)
    assert messages[-len(tail) :] == tail  # the current turn, last
    history = messages[: -len(tail)]
    assert _tokens(history) <= max(0, BUDGET - _tokens(tail))
    assert _tokens(messages) <= max(BUDGET, _tokens(tail))
    return messages


def _has_instruction(messages: Sequence[BaseMessage]) -> bool:
    return any(INSTRUCTION in m.text for m in messages)


@pytest.mark.slow  # (a replica, or a 200-turn agent: seconds)
def test_a_200_turn_agent_keeps_pairs_the_budget_and_the_instruction(server: Server) -> None:
    """With a message over the whole budget at turn 51 (sent as the current turn, then kept
    in the cold tier: no OverBudget, then or later) and the server flushed at turn 120
    (the middleware stores the conversation again from the graph state)."""
    url = f"redis://127.0.0.1:{server.port}"
    thread = f"t200-{secrets.token_hex(4)}"
    model = ScriptedModel()
    middleware = MemevictMiddleware(url=url, max_tokens=BUDGET)
    flusher = redis.Redis.from_url(url)
    try:
        agent = _agent(model, middleware)
        for turn in range(TURNS):
            if turn == FLUSH_AT:
                flusher.flushdb()
            agent.invoke({"messages": [HumanMessage(_user(turn))]}, _config(thread))
        state = agent.get_state(_config(thread)).values["messages"]
    finally:
        middleware.close()
        flusher.close()
    huge = next(i for i, sent in enumerate(model.sent) if _user(HUGE_AT) in sent[-1].text)
    assert _tokens(model.sent[huge][1:-1]) == 0  # the current turn alone: no room left
    assert _has_instruction(model.sent[huge + 1])  # it evicted nothing
    assert not any(_user(HUGE_AT) in m.text for m in model.sent[huge + 1])  # it went cold
    flushed = next(i for i, s in enumerate(model.sent) if f"turn {FLUSH_AT + 1}" in s[-1].text)
    assert _has_instruction(model.sent[flushed])  # stored again from the graph state

    # A tool round trip on every other turn; every call answered the turn's last message.
    lookups = _lookups(range(TURNS))
    assert len(model.sent) == TURNS + lookups
    errors = 0
    for sent in model.sent:
        messages = _check(sent)
        errors += sum(isinstance(m, ToolMessage) and m.status == "error" for m in messages)
    assert errors > 0  # failed tool calls went through the window too
    assert _has_instruction(model.sent[-1])
    assert len(model.sent[-1]) > 5
    # The graph state is left alone: it holds the whole conversation.
    assert len(state) == TURNS + (TURNS + lookups) + lookups
    with MemoryStore.from_url(url, f"langchain:{thread}") as store:
        stats = store.stats()
        assert stats.cold > 0  # memories were evicted, and kept recallable
        assert stats.whitelisted >= 1  # the instruction


@pytest.mark.slow  # (a 200-turn agent: seconds)
def test_the_same_200_turns_through_fifo_lose_the_instruction() -> None:
    """The comparison (no server: once, not on each server's leg)."""
    fifo = ScriptedModel()
    fifo_agent = _agent(fifo, FifoMiddleware(BUDGET))
    for turn in range(TURNS):
        fifo_agent.invoke({"messages": [HumanMessage(_user(turn))]}, _config("fifo"))
    assert not _has_instruction(fifo.sent[-1])
    assert len(fifo.sent[-1]) > 5  # FIFO kept a window too, just the wrong one


def test_the_async_path_keeps_one_namespace_per_thread(server: Server) -> None:
    url = f"redis://127.0.0.1:{server.port}"
    suffix = secrets.token_hex(4)
    model = ScriptedModel()
    middleware = MemevictMiddleware(url=url, max_tokens=BUDGET)
    agent = _agent(model, middleware)

    async def run() -> None:
        try:
            for turn in range(TURNS_ASYNC):
                await agent.ainvoke(
                    {"messages": [HumanMessage(_user(turn))]}, _config(f"a-{suffix}")
                )
                # Another thread, without the instruction, between every turn.
                await agent.ainvoke(
                    {"messages": [HumanMessage(_user(turn + 1))]}, _config(f"b-{suffix}")
                )
        finally:
            await middleware.aclose()

    asyncio.run(run())
    for sent in model.sent:
        _check(sent)
    # Every call of thread a had the instruction, none of thread b (whose first message
    # is turn 1's): each thread has its own namespace.
    with_it = sum(_has_instruction(sent) for sent in model.sent)
    assert with_it == TURNS_ASYNC + _lookups(range(TURNS_ASYNC))
    assert len(model.sent) - with_it == TURNS_ASYNC + _lookups(range(1, TURNS_ASYNC + 1))


def test_a_cluster_url_sync_and_async(cluster: Cluster) -> None:
    url = cluster.stable_url()
    suffix = secrets.token_hex(4)
    model = ScriptedModel()
    middleware = MemevictMiddleware(url=url, max_tokens=BUDGET)
    agent = _agent(model, middleware)
    try:
        for turn in range(20):
            agent.invoke({"messages": [HumanMessage(_user(turn))]}, _config(f"s-{suffix}"))
        assert isinstance(middleware.conversation("langchain:x").store.client, RedisCluster)
    finally:
        middleware.close()

    async def run() -> None:
        try:
            for turn in range(20):
                await agent.ainvoke(
                    {"messages": [HumanMessage(_user(turn))]}, _config(f"a-{suffix}")
                )
            conversation = await middleware.aconversation("langchain:x")
            assert isinstance(conversation.store.client, AsyncRedisCluster)
        finally:
            await middleware.aclose()

    asyncio.run(run())
    assert len(model.sent) == 2 * (20 + _lookups(range(20)))
    for sent in model.sent:
        _check(sent)
        assert _has_instruction(sent)


def test_a_shared_namespace_sends_each_thread_only_its_own_messages(server: Server) -> None:
    url = f"redis://127.0.0.1:{server.port}"
    suffix = secrets.token_hex(4)
    model = ScriptedModel()
    middleware = MemevictMiddleware(url=url, max_tokens=BUDGET, namespace=f"lc-shared-{suffix}")
    agent = _agent(model, middleware)
    try:
        for turn in range(10):
            agent.invoke({"messages": [HumanMessage(_user(turn))]}, _config(f"a-{suffix}"))
            agent.invoke({"messages": [HumanMessage(f"b says {turn}")]}, _config(f"b-{suffix}"))
    finally:
        middleware.close()
    for sent in model.sent:
        _check(sent)
        texts = [m.text for m in sent[1:]]
        b_thread = any(t.startswith("b says") for t in texts)
        assert not (b_thread and _has_instruction(sent))  # a's instruction stays in a
    with MemoryStore.from_url(url, f"lc-shared-{suffix}") as store:
        assert store.stats().hot > 0  # both threads remembered in the one namespace


def test_what_a_message_maps_to() -> None:
    ai = AIMessage("", id="ai-1", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c1"}])
    failed = ToolMessage("Traceback: boom", tool_call_id="c1", status="error", id="t-1")
    user = HumanMessage(INSTRUCTION)  # no id: a stable one from its text
    entries, by_id = entries_of([user, ai, failed])
    assert [e.id for e in entries[1:]] == ["ai-1", "t-1"]
    assert entries[0].id.startswith("sha256:") and entries_of([user])[0][0].id == entries[0].id
    assert by_id["t-1"] is failed
    assert entries[1].group == entries[2].group == "ai:ai-1" and entries[0].group is None
    assert entries[1].message.kind == "function_call" and "f(" in entries[1].message.text
    assert entries[2].message.role == "tool" and entries[2].message.tool_status == "error"
    assert rules(entries[2].message) == 8  # a tool error
    assert rules(entries[0].message) >= PIN_AT  # the instruction is pinned
    # Remembered messages are not serialized again, but the current turn always is.
    known = {e.id for e in entries}
    assert [e.id for e in entries_of([user, ai, failed], known)[0]] == ["ai-1", "t-1"]
    assert [e.id for e in entries_of([ai, failed, user], known)[0]] == [entries[0].id]
    assert whole_pairs([ai]) == [] and whole_pairs([failed]) == []
    assert whole_pairs([user, ai, failed]) == [user, ai, failed]
