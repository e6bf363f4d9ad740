"""The three framework adapters in production (issue 38): what an operator, a retry, a
restart, an edit or another worker does to a session. Each test pins one of the issue's
items under the real framework or the real session protocol, against real servers.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
from agents import Agent, Runner
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from memevict import AsyncMemoryStore, MemoryStore
from memevict.integrations._conversation import approx_tokens
from memevict.integrations.langchain import MemevictMiddleware
from memevict.integrations.langchain import message_of as langchain_message_of
from memevict.integrations.openai_agents import MemevictSession
from memevict.integrations.pydantic_ai import MemevictHistory, SyncMemevictHistory
from tests.proxy import Proxy
from tests.servers import Server
from tests.test_langchain import ScriptedModel as ScriptedChatModel
from tests.test_openai_agents import RUN, ScriptedModel

LOGGER = "memevict.integrations"


def _url(server: Server) -> str:
    return f"redis://127.0.0.1:{server.port}"


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def _texts(items: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(item, separators=(",", ":")) for item in items]


def _langchain_agent(middleware: MemevictMiddleware, replies: Iterable[AIMessage]) -> Any:
    """An agent of an offline model answering ``replies`` in turn, with the middleware."""
    model = GenericFakeChatModel(messages=iter(replies))
    return create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())


@pytest.fixture
def sync_client(server: Server) -> Iterator[redis.Redis]:
    client = server.client()
    client.flushall()
    yield client
    client.close()


# ---------------------------------------------------------------------------
# Item 3: what clear_session or pop_item removed is neither stored again nor sent

QUESTION = "What is the total of the order I placed?"  # context: lifted by its answer
ANSWER = "Your order total is $1,200, due on June 12."  # business data


def test_a_cleared_or_popped_question_is_not_written_back(sync_client: redis.Redis) -> None:
    url = f"redis://127.0.0.1:{sync_client.connection_pool.connection_kwargs['port']}"

    async def run() -> None:
        session = MemevictSession("privacy", url=url, max_tokens=2000)
        try:
            await session.add_items([_user(QUESTION)])
            await session.clear_session()
            await session.add_items([_assistant(ANSWER)])  # (the answer lifts its question)
            assert [i["content"] for i in await session.get_items()] == [ANSWER]
            await session.clear_session()
            await session.add_items([_user(QUESTION)])
            assert (await session.pop_item()) == _user(QUESTION)
            await session.add_items([_assistant(ANSWER)])
            assert [i["content"] for i in await session.get_items()] == [ANSWER]
        finally:
            await session.clear_session()
            await session.close()

    asyncio.run(run())


def test_another_workers_session_stops_sending_a_cleared_conversation(
    sync_client: redis.Redis,
) -> None:
    url = f"redis://127.0.0.1:{sync_client.connection_pool.connection_kwargs['port']}"

    async def run() -> None:
        client = redis.asyncio.Redis.from_url(url)
        a = MemevictSession("two-workers", client=client, max_tokens=2000)
        b = MemevictSession("two-workers", client=client, max_tokens=2000)
        try:
            await b.get_items()
            await b.add_items([_user(QUESTION)])
            await b.add_items([_assistant(ANSWER)])
            assert len(await b.get_items()) == 2
            await a.clear_session()  # (the user asked to forget everything)
            await a.add_items([_user("hello again")])  # (the namespace exists again)
            assert [i["content"] for i in await b.get_items()] == ["hello again"]
            await b.add_items([_assistant("Your balance is $300, due on July 1.")])
            contents = [i["content"] for i in await a.get_items()]
            assert QUESTION not in contents and ANSWER not in contents, contents
        finally:
            await a.clear_session()
            await client.aclose()

    asyncio.run(run())


# ---------------------------------------------------------------------------
# Item 4: two session ids never share a namespace


def test_an_id_that_looks_hashed_has_a_namespace_of_its_own(server: Server) -> None:
    url = _url(server)
    spaced = "alice smith"
    looks_hashed = "sha256:" + hashlib.sha256(spaced.encode()).hexdigest()

    async def openai() -> None:
        one = MemevictSession(spaced, url=url)
        other = MemevictSession(looks_hashed, url=url)
        try:
            assert one.store.namespace != other.store.namespace
            await one.clear_session()
            await other.clear_session()
            await one.add_items([_user("my account number is 1234")])
            assert await other.get_items() == []
        finally:
            await one.clear_session()
            await one.close()
            await other.close()

    asyncio.run(openai())
    middleware = MemevictMiddleware(url=url)
    assert middleware.thread_namespace(spaced) != middleware.thread_namespace(looks_hashed)
    named = [MemevictMiddleware(sid, url=url).namespace for sid in (spaced, looks_hashed)]
    assert named[0] != named[1]
    histories = [SyncMemevictHistory(sid, url=url) for sid in (spaced, looks_hashed)]
    try:
        assert histories[0].namespace != histories[1].namespace
    finally:
        for history in histories:
            history.close()


# ---------------------------------------------------------------------------
# Item 6: a message edited in the graph state is sent at its new cost


def test_an_edited_message_costs_its_new_tokens(server: Server) -> None:
    model = ScriptedChatModel()
    middleware = MemevictMiddleware(url=_url(server), max_tokens=300)
    agent = create_agent(
        model,
        system_prompt="You are a clerk.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    thread = {"configurable": {"thread_id": "edited"}}
    try:
        middleware.clear_session("edited")
        for n in range(12):
            agent.invoke({"messages": [HumanMessage(f"note {n}", id=f"h{n}")]}, thread)
        edited = [HumanMessage(f"note {n}: " + "long words " * 100, id=f"h{n}") for n in range(12)]
        agent.update_state(thread, {"messages": edited})  # (same ids: replaced in the state)
        agent.invoke({"messages": [HumanMessage("and now?")]}, thread)
        sent = [m for m in model.sent[-1] if not isinstance(m, SystemMessage)][:-1]
        cost = sum(approx_tokens(langchain_message_of(m).text) for m in sent)
        assert cost <= 300, cost
    finally:
        middleware.clear_session("edited")
        middleware.close()


# ---------------------------------------------------------------------------
# Item 7: an empty message costs 0 tokens with a tokenizer, and is stored all the same


def words(text: str) -> int:
    """A tokenizer's count: 0 for an empty text."""
    return len(text.split())


def test_an_empty_item_is_stored_with_a_real_tokenizer(server: Server) -> None:
    async def run() -> list[dict[str, Any]]:
        session = MemevictSession("empty", url=_url(server), count_tokens=words)
        try:
            await session.clear_session()
            call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": ""}
            output = {"type": "function_call_output", "call_id": "c1", "output": ""}
            await session.add_items([_user("run f"), call, output, _assistant(""), _user("ok")])
            return await session.get_items()
        finally:
            await session.clear_session()
            await session.close()

    assert len(asyncio.run(run())) == 5


def test_an_empty_reply_is_stored_with_a_real_tokenizer(server: Server) -> None:
    replies = [AIMessage(""), AIMessage("done"), AIMessage("")]
    middleware = MemevictMiddleware(url=_url(server), count_tokens=words)
    agent = _langchain_agent(middleware, replies)
    thread = {"configurable": {"thread_id": "empty"}}
    try:
        middleware.clear_session("empty")
        for text in ("first", "second", "third"):
            agent.invoke({"messages": [HumanMessage(text)]}, thread)
        store = middleware.conversation(middleware.thread_namespace("empty")).store
        assert store.stats().hot == 5  # (the last reply is stored by the next call)
    finally:
        middleware.clear_session("empty")
        middleware.close()


def test_an_empty_tool_output_is_stored_with_a_real_tokenizer(server: Server) -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if isinstance(messages[-1].parts[-1], ToolReturnPart):
            return ModelResponse([TextPart("done")])
        return ModelResponse([ToolCallPart("silent", {})])

    history = SyncMemevictHistory("empty", url=_url(server), count_tokens=words)
    agent = PydanticAgent(FunctionModel(model), capabilities=[ProcessHistory(history)])

    @agent.tool_plain
    def silent() -> str:
        """Answers nothing."""
        return ""

    try:
        history.clear_session()
        result = agent.run_sync("first")
        agent.run_sync("second", message_history=result.all_messages())
        assert history.store.stats().hot >= 4
    finally:
        history.clear_session()
        history.close()


# ---------------------------------------------------------------------------
# Item 8: any call_id groups its call with its output


ODD_CALL_IDS = ("é" * 300, "a\0b", "half \ud800 a pair", "sha256:" + "0" * 64)


def test_odd_call_ids_group_their_call_and_output(server: Server) -> None:
    async def run() -> None:
        session = MemevictSession("odd-calls", url=_url(server), max_tokens=0)
        try:
            await session.clear_session()
            items = [_user("look these up")]
            for n, call_id in enumerate(ODD_CALL_IDS):
                call = {"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"}
                items += [call, {"type": "function_call_output", "call_id": call_id, "output": n}]
            items.append(_assistant("done"))
            await session.add_items(items)
            assert await session.get_items() == items
            groups = {
                m.group for m in (await session.store.scan("hot")).memories if m.group is not None
            }
            assert len(groups) == len(ODD_CALL_IDS)  # one per call id: never cut into one
        finally:
            await session.clear_session()
            await session.close()

    asyncio.run(run())


# ---------------------------------------------------------------------------
# Item 9: a retried call or run stores its items once


@pytest.fixture
def proxy(server: Server) -> Iterator[Proxy]:
    p = Proxy(server.port)
    yield p
    p.close()


async def _stored(store: AsyncMemoryStore) -> list[str]:
    """The texts of every memory of the namespace, hot and cold."""
    texts = []
    for tier in ("hot", "cold"):
        cursor = None
        while cursor != 0:
            page = await store.scan(tier, cursor or 0, count=200)
            texts += [m.text or "" for m in page.memories]
            cursor = page.cursor
    return texts


def test_a_retried_add_after_a_lost_reply_stores_once(proxy: Proxy, server: Server) -> None:
    async def run() -> None:
        # No resend by redis-py: the lost reply reaches the caller, which retries.
        client = redis.asyncio.Redis(port=proxy.port, retry=Retry(NoBackoff(), 0))
        session = MemevictSession("retried", client=client, max_tokens=2000)
        try:
            await session.clear_session()
            turn = [_user("ok"), _assistant("Noted.")]
            for _ in range(3):
                await session.get_items()
                proxy.drop_replies(1)  # the server stores the turn; the reply is lost
                with pytest.raises(redis.ConnectionError):
                    await session.add_items(turn)
                await session.add_items(turn)  # the application's retry
            # three turns said the same words: stored three times, no more
            assert sorted(await _stored(session.store)) == sorted(_texts(turn * 3))
        finally:
            await session.clear_session()
            await client.aclose()

    asyncio.run(run())


def test_a_run_retried_after_a_lost_reply_stores_its_input_once(
    proxy: Proxy, server: Server
) -> None:
    """Runner.run adds its input, calls the model, adds the reply: the reply's write is
    lost (applied, unanswered), the run fails, and the application runs it again."""

    async def run() -> None:
        client = redis.asyncio.Redis(port=proxy.port, retry=Retry(NoBackoff(), 0))
        session = MemevictSession("retried-run", client=client, max_tokens=2000)
        agent = Agent(name="clerk", instructions="You are a clerk.", model=ScriptedModel())
        adds = 0
        add_items = session.add_items

        async def lossy_add_items(items: list[Any]) -> None:
            nonlocal adds
            adds += 1
            if adds == 2:  # the reply of the first run
                proxy.drop_replies(1)
            await add_items(items)

        session.add_items = lossy_add_items  # type: ignore[method-assign]
        try:
            await session.clear_session()
            with pytest.raises(redis.ConnectionError):
                await Runner.run(agent, "hello there", session=session, run_config=RUN)
            await Runner.run(agent, "hello there", session=session, run_config=RUN)  # retry
            stored = await _stored(session.store)
            assert sum('"hello there"' in text for text in stored) == 1, stored
            await Runner.run(agent, "hello there", session=session, run_config=RUN)  # said again
            stored = await _stored(session.store)
            assert sum('"hello there"' in text for text in stored) == 2, stored
        finally:
            await session.clear_session()
            await client.aclose()

    asyncio.run(run())


# ---------------------------------------------------------------------------
# Item 10: a memory the adapter did not write is left out, and said once


NOTE = "operator: call the customer back tomorrow"


def _operator_note(client: redis.Redis, namespace: str) -> None:
    """What ``memevict -n <namespace> remember note --text ...`` does."""
    MemoryStore(client, namespace).remember("note", 9.0, text=NOTE)


def test_a_foreign_memory_is_left_out_and_logged_once(
    sync_client: redis.Redis, server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    url = _url(server)
    caplog.set_level(logging.WARNING, LOGGER)

    async def openai() -> None:
        session = MemevictSession("foreign", url=url)
        agent = Agent(name="clerk", instructions="You are a clerk.", model=ScriptedModel())
        try:
            await session.add_items([_user("hello")])
            _operator_note(sync_client, session.store.namespace)
            for text in ("one", "two"):
                await Runner.run(agent, text, session=session, run_config=RUN)
            assert NOTE not in json.dumps(await session.get_items())
            assert (await session.pop_item()) is not None  # (its own newest, not the note)
        finally:
            await session.clear_session()
            await session.close()

    asyncio.run(openai())

    history = SyncMemevictHistory("foreign", url=url)
    try:
        pydantic_agent = PydanticAgent(
            FunctionModel(lambda m, i: ModelResponse([TextPart("ok")])),
            capabilities=[ProcessHistory(history)],
        )
        result = pydantic_agent.run_sync("hello")
        _operator_note(sync_client, history.namespace)
        for text in ("one", "two"):
            result = pydantic_agent.run_sync(text, message_history=result.all_messages()[-1:])
    finally:
        history.clear_session()
        history.close()

    middleware = MemevictMiddleware(url=url)
    agent = _langchain_agent(middleware, [AIMessage(f"r{n}") for n in range(3)])
    thread = {"configurable": {"thread_id": "foreign"}}
    try:
        agent.invoke({"messages": [HumanMessage("hello")]}, thread)
        _operator_note(sync_client, middleware.thread_namespace("foreign"))
        for text in ("one", "two"):
            agent.invoke({"messages": [HumanMessage(text)]}, thread)
    finally:
        middleware.clear_session("foreign")
        middleware.close()
    said = [r.getMessage() for r in caplog.records if "did not write" in r.getMessage()]
    assert len(said) == 3 and all("'note'" in line for line in said), said  # once each


# ---------------------------------------------------------------------------
# Item 11: the application learns in code that a session's history was lost


def test_every_adapter_tells_on_lost(sync_client: redis.Redis, server: Server) -> None:
    url = _url(server)
    told: list[str] = []

    async def openai() -> None:
        session = MemevictSession("lost", url=url, on_lost=told.append)
        try:
            await session.add_items([_user("From now on, answer in French.")])
            await session.get_items()
            sync_client.flushall()  # (a restart without persistence)
            assert await session.get_items() == []
            await session.add_items([_user("hello")])
            assert len(await session.get_items()) == 1
            assert told == [session.store.namespace]  # once
        finally:
            await session.clear_session()
            await session.close()

    asyncio.run(openai())

    class Lost(Exception):
        pass

    def fail(namespace: str) -> None:
        told.append(namespace)
        raise Lost(namespace)

    async def opted_in() -> None:  # an error instead, raised once
        session = MemevictSession("lost-error", url=url, on_lost=fail)
        try:
            await session.add_items([_user("From now on, answer in French.")])
            await session.get_items()
            sync_client.flushall()
            with pytest.raises(Lost):
                await session.get_items()
            assert await session.get_items() == []
        finally:
            await session.clear_session()
            await session.close()

    told.clear()
    asyncio.run(opted_in())
    assert told == ["openai:lost-error"]

    told.clear()
    middleware = MemevictMiddleware(url=url, on_lost=told.append)
    agent = _langchain_agent(middleware, [AIMessage(f"r{n}") for n in range(3)])
    thread = {"configurable": {"thread_id": "lost"}}
    try:
        agent.invoke({"messages": [HumanMessage("hello")]}, thread)
        sync_client.flushall()
        agent.invoke({"messages": [HumanMessage("again")]}, thread)
        agent.invoke({"messages": [HumanMessage("and again")]}, thread)
        assert told == [middleware.thread_namespace("lost")]
    finally:
        middleware.clear_session("lost")
        middleware.close()

    async def pydantic() -> None:
        history = MemevictHistory("lost", url=url, on_lost=told.append)
        pydantic_agent = PydanticAgent(
            FunctionModel(lambda m, i: ModelResponse([TextPart("ok")])),
            capabilities=[ProcessHistory(history)],
        )
        try:
            result = await pydantic_agent.run("hello")
            sync_client.flushall()
            result = await pydantic_agent.run("again", message_history=result.all_messages())
            await pydantic_agent.run("and again", message_history=result.all_messages())
            assert told == [history.namespace]
        finally:
            await history.clear_session()
            await history.aclose()

    told.clear()
    asyncio.run(pydantic())


# ---------------------------------------------------------------------------
# Item 14: a policy set back by the code is logged, field by field


def test_setting_back_an_operators_policy_is_logged(
    sync_client: redis.Redis, server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    url = _url(server)
    caplog.set_level(logging.WARNING, LOGGER)

    async def openai() -> None:
        session = MemevictSession("operated", url=url, max_tokens=8000)
        try:
            await session.add_items([_user("hello")])
            # the operator: memevict -n openai:operated policy --max-tokens 500
            MemoryStore(sync_client, session.store.namespace).set_policy(max_tokens=500)
            restarted = MemevictSession("operated", url=url, max_tokens=8000)
            await restarted.get_items()
            await restarted.close()
        finally:
            await session.clear_session()
            await session.close()

    asyncio.run(openai())
    lines = [r.getMessage() for r in caplog.records if "as given in code" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "max_tokens=500" in lines[0] and "8000" in lines[0] and "openai:operated" in lines[0]
