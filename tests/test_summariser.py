"""The summariser hook of the adapters (issue 42): ``on_evict`` receives the messages a
write evicted from the hot tier, with their content, exactly once per eviction, even with
two workers writing one session at once. The oracle is the namespace's eviction log
(``log_max``), which the scripts write in the same atomic call that moves a memory: the
messages handed over are exactly those the log says went from hot to cold, each once.
Through each adapter, on both servers."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections import Counter
from typing import Any

import pytest
import redis
import redis.asyncio
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memevict import MemoryStore
from memevict.errors import BadArgument
from memevict.integrations._conversation import arun_steps
from memevict.integrations.langchain import MemevictMiddleware
from memevict.integrations.openai_agents import MemevictSession
from memevict.integrations.pydantic_ai import MemevictHistory, SyncMemevictHistory
from tests.servers import Server

# Each message carries a tag of its own, #w<worker>m<n>#, found again in what is handed
# over and in the texts of the memories the log names.
TAG = re.compile(r"#w\d+m\d+#")
# A small budget, so that most turns evict; the log on, as the oracle; no recall (the
# hook is about what leaves, not what comes back).
SETTINGS: dict[str, Any] = {"max_tokens": 300, "recall_share": 0, "log_max": 100_000}
TURNS = 30


def _url(server: Server) -> str:
    return f"redis://127.0.0.1:{server.port}"


def say(worker: int, n: int) -> str:
    return f"worker {worker} says message {n} about the invoice and the deploy #w{worker}m{n}#"


def tags(texts: list[str]) -> list[str]:
    found = []
    for text in texts:
        found += TAG.findall(text)
    return found


def logged_tags(client: redis.Redis, namespace: str) -> list[str]:
    """The tags of every memory the log says went from the hot tier to the cold one."""
    store = MemoryStore(client, namespace)
    left = []
    page = store.evictions(count=200)
    while page:
        left += page
        page = store.evictions(since=page[-1].log_id, count=200) if len(page) == 200 else []
    texts = []
    for e in left:
        if e.to_tier == "cold":
            memory = store.get(e.id)
            assert memory is not None and memory.text is not None, e
            texts.append(memory.text)
    return tags(texts)


def assert_each_once(handed: list[str], logged: list[str]) -> None:
    assert len(logged) > 2 * TURNS // 3, "the test must evict (a smaller budget?)"
    assert Counter(handed) == Counter(logged)
    assert len(set(handed)) == len(handed)  # (nothing handed over twice)


def test_openai_sessions_hand_each_eviction_over_once(server: Server) -> None:
    handed: list[str] = []
    namespaces: set[str] = set()

    async def summarise(namespace: str, items: list[dict[str, Any]]) -> None:
        await asyncio.sleep(0)  # (an async callback is awaited)
        namespaces.add(namespace)
        handed.extend(tags([json.dumps(i) for i in items]))

    async def run() -> str:
        client = redis.asyncio.Redis.from_url(_url(server))
        workers = [
            MemevictSession("summarised", client=client, on_evict=summarise, **SETTINGS)
            for _ in range(2)
        ]

        async def work(k: int, session: MemevictSession) -> None:
            for n in range(TURNS):
                await session.add_items([{"role": "user", "content": say(k, 2 * n)}])
                await session.get_items()
                await session.add_items([{"role": "assistant", "content": say(k, 2 * n + 1)}])

        try:
            await asyncio.gather(*(work(k, s) for k, s in enumerate(workers)))
            return workers[0].store.namespace
        finally:
            await client.aclose()

    namespace = asyncio.run(run())
    assert namespaces == {namespace}
    assert_each_once(handed, logged_tags(server.client(), namespace))


def test_a_failing_callback_is_logged_and_the_session_goes_on(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    def fail(namespace: str, items: list[dict[str, Any]]) -> None:
        raise RuntimeError("the summariser is down")

    async def run() -> int:
        session = MemevictSession("failing", url=_url(server), on_evict=fail, **SETTINGS)
        try:
            for n in range(20):
                await session.add_items([{"role": "user", "content": say(0, n)}])
            return len(await session.get_items())
        finally:
            await session.clear_session()
            await session.close()

    with caplog.at_level(logging.ERROR, logger="memevict.integrations"):
        assert asyncio.run(run()) > 0
    assert "on_evict callback" in caplog.text and "the summariser is down" in caplog.text


def test_langchain_middlewares_hand_each_eviction_over_once(server: Server) -> None:
    handed: list[str] = []
    lock = threading.Lock()

    def summarise(namespace: str, messages: list[BaseMessage]) -> None:
        assert all(isinstance(m, BaseMessage) for m in messages)
        with lock:
            handed.extend(tags([m.text for m in messages]))

    middlewares = [
        MemevictMiddleware("summarised", url=_url(server), on_evict=summarise, **SETTINGS)
        for _ in range(2)
    ]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            replies = iter([AIMessage(say(k, 2 * n + 1)) for n in range(TURNS)])
            agent = create_agent(
                GenericFakeChatModel(messages=replies),
                middleware=[middlewares[k]],
                checkpointer=InMemorySaver(),
            )
            thread = {"configurable": {"thread_id": f"t{k}"}}
            for n in range(TURNS):
                agent.invoke({"messages": [HumanMessage(say(k, 2 * n))]}, thread)
        except BaseException as error:  # (reported below: a thread's error is not raised)
            errors.append(error)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        namespace = middlewares[0].thread_namespace(None)
        assert_each_once(handed, logged_tags(server.client(), namespace))
    finally:
        middlewares[0].clear_session("summarised")
        for m in middlewares:
            m.close()


def test_pydantic_ai_histories_hand_each_eviction_over_once(server: Server) -> None:
    handed: list[str] = []

    async def summarise(namespace: str, messages: list[ModelMessage]) -> None:
        handed.extend(tags([str(m) for m in messages]))

    async def run() -> str:
        client = redis.asyncio.Redis.from_url(_url(server))
        histories = [
            MemevictHistory("summarised", client=client, on_evict=summarise, **SETTINGS)
            for _ in range(2)
        ]

        async def work(k: int, history: MemevictHistory) -> None:
            replies = iter(range(1, 2 * TURNS, 2))

            def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
                return ModelResponse([TextPart(say(k, next(replies)))])

            agent = Agent(FunctionModel(reply), capabilities=[ProcessHistory(history)])
            result = await agent.run(say(k, 0))
            for n in range(1, TURNS):
                result = await agent.run(say(k, 2 * n), message_history=result.all_messages())

        try:
            await asyncio.gather(*(work(k, h) for k, h in enumerate(histories)))
            return histories[0].namespace
        finally:
            await client.aclose()

    namespace = asyncio.run(run())
    assert_each_once(handed, logged_tags(server.client(), namespace))


def test_a_sync_history_refuses_an_awaitable_callback(server: Server) -> None:
    async def summarise(namespace: str, messages: list[ModelMessage]) -> None:
        pass

    history = SyncMemevictHistory(
        "sync-hook", url=_url(server), on_evict=summarise, max_tokens=40, recall_share=0
    )
    agent = Agent(
        FunctionModel(lambda m, i: ModelResponse([TextPart("a reply of some words " * 3)])),
        capabilities=[ProcessHistory(history)],
    )
    try:
        with pytest.raises(BadArgument, match="on_evict returned an awaitable"):
            result = agent.run_sync("a question of several words " * 3)
            for _ in range(10):
                result = agent.run_sync("and again " * 5, message_history=result.all_messages())
    finally:
        history.clear_session()
        history.close()


def test_what_another_write_evicted_is_handed_over_from_the_cold_tier(server: Server) -> None:
    """evicted_steps: the ids of a write other than add (pop_item's move out of its
    group), their texts read back from the cold tier; one dropped meanwhile left out."""
    handed: list[list[dict[str, Any]]] = []

    async def summarise(namespace: str, items: list[dict[str, Any]]) -> None:
        handed.append(items)

    async def run() -> None:
        session = MemevictSession(
            "moved", url=_url(server), on_evict=summarise, max_tokens=0, recall_share=0
        )
        try:
            messages = [{"role": "user", "content": say(0, n)} for n in range(3)]
            await session.add_items(messages)
            stored = [m.id for m in (await session.store.scan("hot")).memories]
            await session.store.forget(stored[2])
            steps = session.conversation.evicted_steps([stored[0], stored[2], stored[1]])
            await arun_steps(steps)
        finally:
            await session.clear_session()
            await session.close()

    asyncio.run(run())
    [items] = handed
    assert len(items) == 2 and all(TAG.search(item["content"]) for item in items)
