"""The three framework adapters as a new user meets them (issue 25): one shape, any
session id, a shared client, the policy given in code, and no failure on the model-call
path for what the user did not do wrong. Each test pins one of the issue's items; the
200-turn loops of test_openai_agents, test_langchain and test_pydantic_ai pin the rest
(an over-budget message, a flushed server, parallel calls read with a limit, a dynamic
system prompt) under the real frameworks.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

import pytest
import redis
import redis.asyncio
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memevict import AsyncMemoryStore, MemoryStore
from memevict.clients import async_client_from_url
from memevict.errors import BadArgument, NotFound
from memevict.integrations._conversation import (
    ASKED_BELOW,
    Steps,
    approx_tokens,
    arun_steps,
    run_steps,
)
from memevict.integrations.langchain import MemevictMiddleware
from memevict.integrations.openai_agents import MemevictSession, whole_tail
from memevict.integrations.pydantic_ai import MemevictHistory, SyncMemevictHistory
from tests.servers import Server

ADAPTERS = (MemevictSession, MemevictMiddleware, MemevictHistory, SyncMemevictHistory)


def _url(server: Server) -> str:
    return f"redis://127.0.0.1:{server.port}"


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


# ---------------------------------------------------------------------------
# Item 11: one shape


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.__name__)
def test_every_adapter_has_the_same_shape(adapter: type) -> None:
    parameters = inspect.signature(adapter).parameters
    first = next(iter(parameters.values()))
    assert first.name == "session_id" and first.kind is first.POSITIONAL_OR_KEYWORD
    for name in ("url", "client", "store", "max_tokens", "namespace", "recent", "on_lost"):
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY, name
    assert any(p.kind is p.VAR_KEYWORD for p in parameters.values())  # Policy fields
    assert list(inspect.signature(adapter.from_url).parameters)[:2] == ["session_id", "url"]
    assert hasattr(adapter, "clear_session")


def test_exactly_one_of_url_client_and_store(server: Server) -> None:
    client = redis.Redis(port=server.port)
    try:
        for adapter in (MemevictSession, MemevictHistory, SyncMemevictHistory):
            with pytest.raises(BadArgument, match="one of url, client or store"):
                adapter("s")
            with pytest.raises(BadArgument, match="one of url, client or store"):
                adapter("s", url=_url(server), client=client)
        with pytest.raises(BadArgument, match="one of url, client or store"):
            MemevictMiddleware()
    finally:
        client.close()


# ---------------------------------------------------------------------------
# Item 10: any session id, namespaced per framework


IDS = ("user 42", "thread[1]", "a{b}", "x" * 300, "plain")


def test_any_session_id_is_taken_and_namespaced_per_framework(server: Server) -> None:
    url = _url(server)
    seen: set[str] = set()

    async def openai() -> None:
        for sid in IDS:
            session = MemevictSession.from_url(sid, url, max_tokens=100)
            try:
                await session.add_items([_user(f"hello from {sid[:20]}")])
                assert [i["content"] for i in await session.get_items()] == [
                    f"hello from {sid[:20]}"
                ]
                assert session.store.namespace.startswith("openai:")
                seen.add(session.store.namespace)
                await session.clear_session()
            finally:
                await session.close()

    asyncio.run(openai())
    for sid in IDS:
        history = SyncMemevictHistory.from_url(sid, url, max_tokens=100)
        try:
            assert history.namespace.startswith("pydantic-ai:")
            seen.add(history.namespace)
            history.clear_session()
        finally:
            history.close()
        middleware = MemevictMiddleware.from_url(sid, url, max_tokens=100)
        assert middleware.namespace is not None and middleware.namespace.startswith("langchain:")
        seen.add(middleware.namespace)
    assert len(seen) == 3 * len(IDS)  # one namespace per framework and id
    assert "openai:plain" in seen and "langchain:plain" in seen and "pydantic-ai:plain" in seen
    assert all(ns.count("sha256:") == 0 for ns in seen if ns.endswith("plain"))
    assert sum("sha256:" in ns for ns in seen) == 3 * (len(IDS) - 1)


# ---------------------------------------------------------------------------
# Items 3, 4, 7: the policy given in code is the policy that runs


def test_the_max_tokens_given_in_code_wins_over_the_stored_one(server: Server) -> None:
    url = _url(server)
    items = [_user(f"message number {n} " + "word " * 30) for n in range(40)]  # ~40 tokens

    async def run() -> None:
        first = MemevictSession("policy-wins", url=url, max_tokens=661)
        try:
            await first.clear_session()
            await first.add_items(items)
            assert sum(approx_tokens(i["content"]) for i in await first.get_items()) > 400
        finally:
            await first.close()
        second = MemevictSession("policy-wins", url=url, max_tokens=200, cold_max=5)
        try:
            sent = await second.get_items()
            assert 0 < sum(approx_tokens(i["content"]) for i in sent) <= 200
            stored = await second.store.reload_policy()
            assert (stored.max_tokens, stored.cold_max) == (200, 5)
            assert (await second.store.stats()).tokens <= 200  # evicted to the new budget
        finally:
            await second.close()

    asyncio.run(run())


def test_a_store_given_runs_with_the_max_tokens_given(server: Server) -> None:
    url = _url(server)

    async def run() -> None:
        client = redis.asyncio.Redis.from_url(url)
        try:
            store = AsyncMemoryStore(client, "given-store")
            await store.drop()
            session = MemevictSession("ignored", store=store, max_tokens=50)
            await session.add_items([_user(f"item {n} " + "x" * 20) for n in range(40)])
            sent = await session.get_items()
            assert sent and sum(approx_tokens(i["content"]) for i in sent) <= 50
            assert (await store.reload_policy()).max_tokens == 50
            assert store.namespace == "given-store"
        finally:
            await client.aclose()

    asyncio.run(run())
    sync_client = redis.Redis.from_url(url)
    try:
        store = MemoryStore(sync_client, "given-sync")
        store.drop()
        history = SyncMemevictHistory("ignored", store=store, max_tokens=50)
        agent = Agent(FunctionModel(_echo), capabilities=[ProcessHistory(history)])
        result = agent.run_sync("hello there, first message")
        for n in range(20):
            result = agent.run_sync(f"message {n}", message_history=result.all_messages())
        assert store.reload_policy().max_tokens == 50
        assert len(result.all_messages()) > 3  # a window, not one message
    finally:
        sync_client.close()


def test_max_tokens_zero_sends_the_hot_tier(server: Server) -> None:
    async def run() -> None:
        session = MemevictSession("zero-budget", url=_url(server), max_tokens=0)
        try:
            await session.clear_session()
            await session.add_items([_user(f"item {n}") for n in range(30)])
            assert [i["content"] for i in await session.get_items()] == [
                f"item {n}" for n in range(30)
            ]
        finally:
            await session.close()

    asyncio.run(run())


# ---------------------------------------------------------------------------
# Items 5 and 13: one client for many sessions


def test_a_thousand_sessions_share_one_pool(server: Server) -> None:
    """1,000 sessions on one client of a 50-connection blocking pool, all at once: no
    error, and no more connections than the pool's."""
    url = _url(server)

    async def converse(client: redis.asyncio.Redis, n: int) -> int:
        session = MemevictSession(f"many-{n}", client=client, max_tokens=60)
        for turn in range(3):
            await session.add_items([_user(f"session {n} turn {turn} " + "y" * 40)])
        items = await session.get_items()
        await session.clear_session()
        return len(items)

    async def run() -> list[int]:
        pool = redis.asyncio.BlockingConnectionPool.from_url(url, max_connections=50, timeout=None)
        client = redis.asyncio.Redis(connection_pool=pool)
        watcher = redis.asyncio.Redis.from_url(url)
        try:
            before = (await watcher.info("clients"))["connected_clients"]
            counts = await asyncio.gather(*(converse(client, n) for n in range(1000)))
            opened = (await watcher.info("clients"))["connected_clients"] - before
            assert 1 <= opened <= 50  # the pool's connections, still open
            return counts
        finally:
            await client.aclose()
            await pool.disconnect()
            await watcher.aclose()

    counts = asyncio.run(run())
    assert all(1 <= c <= 3 for c in counts) and len(counts) == 1000


def test_a_client_from_a_url_waits_for_a_connection_without_a_time_limit() -> None:
    client = async_client_from_url("redis://127.0.0.1:1/0")
    pool = client.connection_pool
    assert isinstance(pool, redis.asyncio.BlockingConnectionPool)
    assert pool.timeout is None and pool.max_connections == 50


# ---------------------------------------------------------------------------
# Item 6: a limit never splits parallel calls


def test_a_limit_never_splits_parallel_calls_or_reasoning() -> None:
    call = {"type": "function_call", "name": "f", "arguments": "{}"}
    a, b = {**call, "call_id": "A"}, {**call, "call_id": "B"}
    out_a = {"type": "function_call_output", "call_id": "A", "output": "1"}
    out_b = {"type": "function_call_output", "call_id": "B", "output": "2"}
    items = [_user("q"), a, b, out_a, out_b]
    assert whole_tail(items, 5) == items
    assert whole_tail(items, 4) == [a, b, out_a, out_b]
    assert whole_tail(items, 3) == [b, out_b]  # output A's call is cut: it goes too
    assert whole_tail(items, 1) == []
    reasoning = {"type": "reasoning", "summary": []}
    items = [_user("q"), reasoning, a, out_a]
    assert whole_tail(items, 3) == [reasoning, a, out_a]
    assert whole_tail(items, 2) == []  # a call cut from its reasoning goes, and its output


# ---------------------------------------------------------------------------
# Item 1: an over-budget message never fails the model call (here: through LangChain)


def test_langchain_sends_an_over_budget_message_and_goes_on(server: Server) -> None:
    replies = iter([AIMessage(f"reply {n}") for n in range(10)])
    model = GenericFakeChatModel(messages=replies)
    middleware = MemevictMiddleware(url=_url(server), max_tokens=50)
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "over budget"}}
    try:
        middleware.clear_session("over budget")
        agent.invoke({"messages": [HumanMessage("From now on, answer in French.")]}, thread)
        huge = "log line " * 200  # ~450 tokens, 9x the budget
        state = agent.invoke({"messages": [HumanMessage(huge)]}, thread)
        assert state["messages"][-1].text == "reply 1"  # the model was called
        state = agent.invoke({"messages": [HumanMessage("and now?")]}, thread)
        assert state["messages"][-1].text == "reply 2"  # and is, on every later call
        window = middleware.conversation(middleware.thread_namespace("over budget")).window()
        assert "answer in French" in window[0][1] and all(huge not in t for _, t in window)
        store = middleware.conversation(middleware.thread_namespace("over budget")).store
        ids = [m.id for m in store.scan("cold").memories]
        assert len(ids) == 1  # kept, in the cold tier
    finally:
        middleware.clear_session("over budget")
        middleware.close()


# ---------------------------------------------------------------------------
# Item 9: two processors on one session keep the time order


def _echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1].parts[-1]
    return ModelResponse([TextPart(f"re: {getattr(last, 'content', '')}")])


def test_two_processors_on_one_session_keep_the_time_order(server: Server) -> None:
    url = _url(server)
    a = SyncMemevictHistory("two-processors", url=url, max_tokens=2000)
    b = SyncMemevictHistory("two-processors", url=url, max_tokens=2000)
    try:
        a.clear_session()
        agent_a = Agent(FunctionModel(_echo), capabilities=[ProcessHistory(a)])
        agent_b = Agent(FunctionModel(_echo), capabilities=[ProcessHistory(b)])
        first = agent_a.run_sync("A asks one")
        agent_b.run_sync("B asks one")
        second = agent_a.run_sync("A asks two", message_history=first.all_messages())
        texts = [_text(m) for m in second.all_messages()]
        # (B's reply would be stored by B's next call: a processor sees a run's last
        # response only then)
        assert texts == [
            "A asks one",
            "re: A asks one",
            "B asks one",
            "A asks two",
            "re: A asks two",
        ], texts
    finally:
        a.clear_session()
        a.close()
        b.close()


def _text(message: ModelMessage) -> Any:
    part = message.parts[-1]
    assert isinstance(part, UserPromptPart | TextPart)
    return part.content


def test_a_request_keeps_its_id_when_its_system_prompt_changes() -> None:
    from pydantic_ai.messages import SystemPromptPart

    from memevict.integrations.pydantic_ai import message_id

    user = UserPromptPart("hello", timestamp=UserPromptPart("x").timestamp)
    one = ModelRequest([SystemPromptPart("run 1", dynamic_ref="clock"), user])
    two = ModelRequest([SystemPromptPart("run 2", dynamic_ref="clock"), user])
    assert message_id(one) == message_id(two) == message_id(ModelRequest([user]))


# ---------------------------------------------------------------------------
# Item 12: an answer kept is kept with its question


def test_a_question_is_kept_with_its_answer(server: Server) -> None:
    """The question is context (3), its answer business data (7): the question takes the
    answer's importance less ASKED_BELOW (5), above the chatter (context, 3) that follows,
    so 30 turns of chatter later both are sent."""
    answer = "Your order total is $1,200, due on June 12."
    replies = iter([AIMessage(answer, id="a1")] + [AIMessage(f"ok {n}") for n in range(40)])
    middleware = MemevictMiddleware(url=_url(server), max_tokens=120)
    agent = create_agent(
        GenericFakeChatModel(messages=replies),
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    thread = {"configurable": {"thread_id": "asked"}}
    try:
        middleware.clear_session("asked")
        question = "What is the total of the order I placed?"
        agent.invoke({"messages": [HumanMessage(question, id="q1")]}, thread)
        for n in range(30):
            agent.invoke({"messages": [HumanMessage(f"fine, go on with item {n}")]}, thread)
        conversation = middleware.conversation(middleware.thread_namespace("asked"))
        asked = conversation.store.get("q1")
        window = conversation.window()
        (answered,) = [conversation.store.get(id) for id, text in window if answer in text]
        assert answered is not None and answered.importance > 7.0 * 0.9  # business data
        assert asked is not None  # (above chatter, context at 3.3 at most)
        assert asked.importance == pytest.approx(answered.importance - ASKED_BELOW)
        assert any(question in text for _, text in window)
    finally:
        middleware.clear_session("asked")
        middleware.close()


def _paid(n: int, error: bool) -> list[dict[str, str]]:
    """A user's request, the tool call it causes and the tool's answer (OpenAI items)."""
    out = "payment gateway returned 402: card ending 4242 declined" if error else "paid"
    return [
        _user(f"Please pay order {n} with my card ending 4242."),
        {"type": "function_call", "call_id": f"c{n}", "name": "charge", "arguments": f"{n}"},
        {"type": "function_call_output", "call_id": f"c{n}", "output": f"order {n}: {out}"},
    ]


def test_a_tool_exchange_lifts_its_request_to_its_own_importance(server: Server) -> None:
    """A request whose tool call failed takes the error's importance (tool_error, 8), not
    the error's less ASKED_BELOW as for an answer: a tool call kept is kept with the
    request that explains it. A routine one stays as it was (its exchange is context)."""

    async def run() -> None:
        session = MemevictSession("lifted", url=_url(server), max_tokens=2000)
        try:
            await session.clear_session()
            await session.add_items([*_paid(1, error=True), *_paid(2, error=False)])
            texts = {m.text or "": m for m in await session.store.top(10)}

            def memory(needle: str) -> Any:
                (found,) = [m for text, m in texts.items() if needle in text]
                return found

            error, request = memory("402"), memory("order 1 with")
            assert error.importance == 8.0  # (tool_error: not graded)
            assert request.importance == error.importance
            routine, paid = memory("order 2 with"), memory("order 2: paid")
            assert routine.importance > paid.importance  # (not lowered to its exchange's)
        finally:
            await session.clear_session()
            await session.close()

    asyncio.run(run())


def test_tool_calls_and_results_are_not_indexed(server: Server) -> None:
    """Recall brings back messages, never a bare tool exchange without the request that
    explains it: a tool call and its result are stored but not indexed."""

    async def run() -> None:
        session = MemevictSession("unindexed-tools", url=_url(server), max_tokens=2000)
        try:
            await session.clear_session()
            await session.add_items(_paid(7, error=True))
            assert await session.store.search("declined gateway", 5) == []
            found = await session.store.search("pay order card", 5)
            assert len(found) == 1 and "Please pay order 7" in (found[0].memory.text or "")
        finally:
            await session.clear_session()
            await session.close()

    asyncio.run(run())


@pytest.mark.parametrize("weight", [-0.1, 1.5, True, "1", float("nan")])
def test_a_token_weight_outside_0_to_1_is_refused(server: Server, weight: Any) -> None:
    with pytest.raises(BadArgument, match="token_weight"):
        MemevictSession("weighted", url=_url(server), token_weight=weight)


def test_token_weight_ranks_a_message_by_its_value_per_token(server: Server) -> None:
    """token_weight=1: a message longer than WEIGHED_AT tokens has its importance times
    WEIGHED_AT / its tokens; a shorter one, a tool call or result, and a pinned
    instruction, as the labeler gave them."""

    async def run() -> None:
        plain = MemevictSession("unweighted", url=_url(server), max_tokens=2000, token_weight=0)
        weighted = MemevictSession("weighted", url=_url(server), max_tokens=2000, token_weight=1)
        items = [
            _user("From now on, answer in French."),
            _user("I adopted a puppy named Max last week!"),
            _user("We talked about " + "the garden and the weather, " * 10 + "and more."),
            *_paid(3, error=True)[1:],
        ]
        try:
            for session in (plain, weighted):
                await session.clear_session()
                await session.add_items(items)
            was = {m.text: m for m in await plain.store.top(10)}
            now = {m.text: m for m in await weighted.store.top(10)}
            assert was.keys() == now.keys() and len(was) == 5
            for text, m in now.items():
                before = was[text]
                if before.whitelisted or "402" in (text or "") or '"charge"' in (text or ""):
                    assert m.importance == before.importance, text
                else:
                    tokens = approx_tokens(json.loads(text or "")["content"])
                    factor = min(1, 25 / tokens)
                    assert m.importance == pytest.approx(before.importance * factor)
            short = next(m for t, m in now.items() if "puppy" in (t or ""))
            long = next(m for t, m in now.items() if "garden" in (t or ""))
            assert short.importance == was[short.text].importance  # (not raised)
            assert long.importance < was[long.text].importance
        finally:
            for session in (plain, weighted):
                await session.clear_session()
                await session.close()

    asyncio.run(run())


# ---------------------------------------------------------------------------
# What was just said is sent, whatever its rank


def test_what_was_said_two_turns_ago_is_sent(server: Server) -> None:
    """Facts (business data, 7) and chatter (1-3) alternate under a small budget: every
    call still sends the previous exchange, the lowest-ranked messages of all."""
    sent: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(messages)
        return ModelResponse([TextPart(f"ok {len(sent)}")])

    history = SyncMemevictHistory.from_url("just-said", _url(server), max_tokens=80)
    try:
        history.clear_session()
        agent = Agent(FunctionModel(model), capabilities=[ProcessHistory(history)])
        said = [
            f"Invoice INV-{n} totals ${n}00, due on June {n}." if n % 2 else "ok"
            for n in range(1, 41)
        ]
        result = agent.run_sync(said[0])
        for n, text in enumerate(said[1:], start=1):
            result = agent.run_sync(text, message_history=result.all_messages())
            texts = [str(getattr(p, "content", "")) for m in sent[-1] for p in m.parts]
            assert said[n - 1] in texts and f"ok {n}" in texts, (n, texts)
        assert sum(len(s) for s in sent) / len(sent) > 4  # facts besides the recent ones
    finally:
        history.clear_session()
        history.close()


# ---------------------------------------------------------------------------
# Issue 37: the sync and async conversations are one implementation, run as steps


def _steps(store: Any, caught: type[Exception]) -> Steps[list[object]]:
    """Store calls as the conversations' logic makes them: each answer comes back, and an
    error where its call was yielded (NotFound: forgetting what is not there)."""
    yield lambda: store.remember("a", 5.0, text="one")
    memory = yield lambda: store.get("a")
    try:
        yield lambda: store.forget("not there")
    except caught as error:
        return [memory.text, type(error).__name__]
    return [memory.text]


def test_sync_and_async_run_the_same_steps(server: Server) -> None:
    url = _url(server)
    with MemoryStore.from_url(url, "steps-sync") as store:
        sync = run_steps(_steps(store, NotFound))
        with pytest.raises(NotFound):  # (an error the steps do not catch: the run's)
            run_steps(_steps(store, BadArgument))
        store.drop()

    async def run() -> list[object]:
        async with AsyncMemoryStore.from_url(url, "steps-async") as store:
            answer = await arun_steps(_steps(store, NotFound))
            with pytest.raises(NotFound):
                await arun_steps(_steps(store, BadArgument))
            await store.drop()
            return answer

    assert sync == asyncio.run(run()) == ["one", "NotFound"]
