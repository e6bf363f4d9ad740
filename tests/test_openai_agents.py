"""MemevictSession under a real OpenAI Agents SDK Runner, with a scripted Model (no network).

A 200-turn conversation with tool calls (some failing) runs through a small token budget.
Every input the model is sent is checked: no tool call without its output or output without
its call, the session's history within the budget, and the user's standing instruction from
turn 0 still there at the end. The same conversation through a FIFO session with the same
budget loses it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio
from agents import (
    Agent,
    ModelResponse,
    ModelSettings,
    RunConfig,
    Runner,
    Usage,
    function_tool,
)
from agents.memory import SessionSettings
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from memevict.integrations._conversation import approx_tokens
from memevict.integrations.openai_agents import (
    MemevictSession,
    entries_of,
    loads_all,
    message_of,
    whole_tail,
)
from tests.cluster import Cluster
from tests.servers import Server

TURNS = 200
BUDGET = 300  # tokens of history: a dozen or two items
INSTRUCTION = "From now on, always answer in French and sign as Bob."
RUN = RunConfig(tracing_disabled=True)


def _tokens(item: dict[str, Any]) -> int:
    """An item's token cost: of the text the model reads of it."""
    return approx_tokens(message_of(item).text)


class ScriptedModel(Model):
    """Answers by the last input item: a user message on an even turn asks for a tool,
    a tool output or any other message gets a reply. Records every input it is sent."""

    def __init__(self) -> None:
        self.inputs: list[list[dict[str, Any]]] = []
        self.calls = 0

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: ModelSettings,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.inputs.append([dict(i) for i in items])
        last = items[-1]
        self.calls += 1
        turn = len(self.inputs)
        if last.get("role") == "user" and "lookup" in str(last.get("content")):
            # "lookup orders N and M" asks for two calls at once (parallel tool calls)
            orders = re.findall(r"\d+", str(last.get("content"))) or [str(turn)]
            calls = [
                ResponseFunctionToolCall(
                    type="function_call",
                    call_id=f"call-{self.calls}-{k}",
                    name="lookup",
                    arguments=json.dumps({"q": f"order {order}"}),
                    id=f"fc-{self.calls}-{k}",
                    status="completed",
                )
                for k, order in enumerate(orders)
            ]
            return ModelResponse(output=list(calls), usage=Usage(), response_id=None)
        reply = ResponseOutputMessage(
            id=f"msg-{self.calls}",
            type="message",
            role="assistant",
            status="completed",
            content=[
                ResponseOutputText(
                    type="output_text", text=f"Noted, reply {self.calls}.", annotations=[]
                )
            ],
        )
        return ModelResponse(output=[reply], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


@function_tool
def lookup(q: str) -> str:
    """Looks an order up."""
    n = int(q.split()[-1])
    if n % 5 == 0:
        raise RuntimeError(f"lookup failed: connection refused for {q}")
    return f"order {n}: shipped, " + "details " * 20


class FifoSession:
    """The comparison: keeps the newest items that fit in the same budget (what a FIFO
    list trimmed to a token budget keeps), pairs kept whole as memevict does."""

    def __init__(self, session_id: str, budget: int) -> None:
        self.session_id, self.session_settings = session_id, None
        self.items: list[dict[str, Any]] = []
        self.budget = budget

    async def get_items(self, limit: int | None = None) -> list[dict[str, Any]]:
        kept: list[dict[str, Any]] = []
        used = 0
        for item in reversed(self.items):
            used += _tokens(item)
            if used > self.budget:
                break
            kept.insert(0, item)
        return whole_tail(kept, len(kept))

    async def add_items(self, items: list[dict[str, Any]]) -> None:
        self.items.extend(items)

    async def pop_item(self) -> dict[str, Any] | None:
        return self.items.pop() if self.items else None

    async def clear_session(self) -> None:
        self.items.clear()


HUGE_AT, FLUSH_AT = 51, 120  # a message over the whole budget; the namespace flushed


def _user(turn: int) -> str:
    if turn == 0:
        return INSTRUCTION
    if turn == HUGE_AT:
        return "Here is the whole log: " + "line of the log " * BUDGET  # ~4x the budget
    if turn % 6 == 2:
        return f"Please lookup orders {turn} and {turn + 1} for me."
    if turn % 2 == 0:
        return f"Please lookup order {turn} for me."
    return f"ok thanks, turn {turn}"


async def _converse(
    session: Any, turns: int = TURNS, flush: Callable[[], Awaitable[object]] | None = None
) -> ScriptedModel:
    model = ScriptedModel()
    agent = Agent(name="clerk", instructions="You are a clerk.", model=model, tools=[lookup])
    for turn in range(turns):
        if turn == FLUSH_AT and flush is not None:
            await flush()
        await Runner.run(agent, _user(turn), session=session, run_config=RUN)
    return model


def _check_pairs(items: list[dict[str, Any]]) -> None:
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert sorted(calls) == sorted(outputs), items


def _calls_before(model: ScriptedModel, turn: int) -> int:
    """The model calls made before ``turn``'s run (one more per tool round trip)."""
    return sum(1 + ("lookup" in _user(t)) for t in range(turn))


def test_a_200_turn_agent_keeps_pairs_the_budget_and_the_instruction(server: Server) -> None:
    """With parallel tool calls, a message over the whole budget at turn 51 (sent as the
    current turn, then kept in the cold tier: no OverBudget) and the server flushed at
    turn 120 (the session goes on, empty, with no error)."""
    url = f"redis://127.0.0.1:{server.port}"

    async def run() -> tuple[ScriptedModel, list[dict[str, Any]]]:
        session = MemevictSession("agents-200", url=url, max_tokens=BUDGET)
        flusher = redis.asyncio.Redis.from_url(url)
        try:
            await session.clear_session()
            model = await _converse(session, flush=flusher.flushdb)
            history = await session.get_items()
            stats = await session.store.stats()
            assert stats.cold > 0  # memories were evicted, and kept recallable
            return model, history
        finally:
            await session.close()
            await flusher.aclose()

    model, history = asyncio.run(run())
    lookups = sum("lookup" in _user(turn) for turn in range(TURNS))
    assert len(model.inputs) == TURNS + lookups  # one more model call per tool round trip
    for sent in model.inputs:
        _check_pairs(sent)
    assert sum(_tokens(i) for i in history) <= BUDGET
    huge = model.inputs[_calls_before(model, HUGE_AT)]
    assert _user(HUGE_AT) in json.dumps(huge[-1])  # the model got it, as the current turn
    assert sum(map(_tokens, huge[:-1])) <= BUDGET  # the history, as on every turn
    after = model.inputs[_calls_before(model, HUGE_AT + 1)]
    assert any(INSTRUCTION in json.dumps(i) for i in after)  # it evicted nothing
    assert not any(_user(HUGE_AT) in json.dumps(i) for i in after)  # and went cold
    before_flush = model.inputs[_calls_before(model, FLUSH_AT) - 1]
    assert any(INSTRUCTION in json.dumps(i) for i in before_flush)
    assert any("turn 199" in json.dumps(i) for i in history)  # the session went on
    assert len({i["call_id"] for i in history if i.get("type") == "function_call"}) > 2


def test_reads_with_a_limit_never_split_parallel_calls(server: Server) -> None:
    """The SDK reads ``get_items(limit)`` with ``SessionSettings(limit=N)``: no input the
    model gets has a call without its output or an output without its call (the 200-turn
    conversation, parallel calls, the over-budget message and all, at limit 5)."""
    url = f"redis://127.0.0.1:{server.port}"

    async def run(limit: int, turns: int) -> ScriptedModel:
        session = MemevictSession(
            f"agents-limit-{limit}",
            url=url,
            max_tokens=BUDGET,
            session_settings=SessionSettings(limit=limit),
        )
        try:
            await session.clear_session()
            return await _converse(session, turns=turns)
        finally:
            await session.close()

    for limit, turns in ((2, 30), (3, 30), (4, 30), (5, TURNS)):
        model = asyncio.run(run(limit, turns))
        for sent in model.inputs:
            _check_pairs(sent)
        assert any(len(sent) > 2 for sent in model.inputs)

    fifo = asyncio.run(_converse(FifoSession("fifo", BUDGET)))
    assert not any(INSTRUCTION in json.dumps(i) for i in fifo.inputs[-1])
    assert len(fifo.inputs[-1]) > 3  # FIFO kept a window too, just the wrong one


def test_pop_get_limit_and_clear(server: Server) -> None:
    url = f"redis://127.0.0.1:{server.port}"

    async def run() -> None:
        session = MemevictSession("agents-pop", url=url, max_tokens=BUDGET)
        try:
            await session.clear_session()
            assert await session.get_items() == [] and await session.pop_item() is None
            call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
            output = {"type": "function_call_output", "call_id": "c1", "output": "42"}
            user = {"role": "user", "content": "what is f?"}
            await session.add_items([user, call, output])
            assert await session.get_items() == [user, call, output]
            assert await session.get_items(limit=2) == [call, output]
            assert await session.get_items(limit=1) == []  # never an output without its call
            assert await session.pop_item() == output
            # the pop took only the newest; a call without its output is not sent
            assert await session.get_items() == [user]
            assert await session.pop_item() == call
            assert await session.get_items() == [user]
            await session.clear_session()
            assert await session.get_items() == []
        finally:
            await session.close()

    asyncio.run(run())


def test_the_session_runs_on_a_cluster_url(cluster: Cluster) -> None:
    url = cluster.stable_url()

    async def run() -> ScriptedModel:
        sessions = [MemevictSession(f"agents-c{n}", url=url, max_tokens=BUDGET) for n in range(3)]
        try:
            for session in sessions:
                await session.clear_session()
            models = [await _converse(session, turns=40) for session in sessions]
            assert all([await s.get_items() for s in sessions])
            return models[-1]
        finally:
            for session in sessions:
                await session.close()

    model = asyncio.run(run())
    for sent in model.inputs:
        _check_pairs(sent)
    assert any(INSTRUCTION in json.dumps(i) for i in model.inputs[-1])


def test_a_reasoning_item_is_linked_to_the_item_after_it() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    call = {"type": "function_call", "call_id": "c9", "name": "f", "arguments": "{}"}
    message = {"role": "assistant", "content": "done"}
    entries, left_open = entries_of([reasoning, call, reasoning, message])
    groups = [e.group for e in entries]
    assert groups[0] == groups[1] == "call:c9"  # the reasoning joins the call's group
    assert groups[2] == groups[3] and groups[2] is not None and groups[2] != "call:c9"
    assert left_open is None and len({e.id for e in entries}) == 4

    entries, left_open = entries_of([message, reasoning])  # the next item comes later
    assert entries[0].group is None and left_open == entries[1].group is not None
    later, _ = entries_of([message], left_open)
    assert later[0].group == left_open


def test_loads_all_reads_each_text_as_its_own_item() -> None:
    """One parse of all texts where each is one object; where one is not, each text alone,
    so a text edited by hand fails as itself and never shifts the items after it."""
    items = [{"role": "user", "content": 'a "quoted", [bracketed] text'}, {"type": "x", "n": 1}]
    texts = [json.dumps(item) for item in items]
    assert loads_all(texts) == items and loads_all([]) == []
    with pytest.raises(json.JSONDecodeError):  # two objects in one text: not two items
        loads_all(['{"a":1},{"b":2}', texts[0]])
    with pytest.raises(json.JSONDecodeError):
        loads_all([texts[0], '{"cut'])
    assert loads_all(["[1]", texts[1]]) == [[1], items[1]]  # (not an object: read alone)


def test_runner_run_recalls_by_the_new_input_with_the_session_input_callback(
    server: Server,
) -> None:
    """Runner.run reads get_items() before it adds its input: the session then recalls
    nothing (the latest user message is answered), and with
    RunConfig(session_input_callback=session.recall_input) it recalls what the run's input
    asks about, within max_tokens."""
    code = "my locker code is 4711, keep it"

    async def ask(callback: bool) -> list[dict[str, Any]]:
        model = ScriptedModel()
        agent = Agent(name="clerk", instructions="You are a clerk.", model=model)
        session = MemevictSession(f"runner-{callback}", url=server.url, max_tokens=150)
        await session.clear_session()
        config = RunConfig(
            tracing_disabled=True,
            session_input_callback=session.recall_input if callback else None,
        )
        await Runner.run(agent, code, session=session, run_config=config)
        for i in range(30):
            said = f"let us chat about the weather, part {i}"
            await Runner.run(agent, said, session=session, run_config=config)
        await Runner.run(agent, "What is my locker code?", session=session, run_config=config)
        await session.clear_session()
        await session.close()
        sent = model.inputs[-1]
        assert sent[-1]["content"] == "What is my locker code?"
        return sent

    assert code not in [i.get("content") for i in asyncio.run(ask(False))]
    sent = asyncio.run(ask(True))
    assert code in [i.get("content") for i in sent]
    assert sum(_tokens(i) for i in sent) <= 150  # (the input counted: not so without)


def test_what_recall_input_recalls_is_not_stored_again(server: Server) -> None:
    """The SDK stores what a session_input_callback returns beyond the history it read and
    the run's input as new items of the turn: a recalled message would come back as a copy
    each time it is recalled, and the copies fill the prompt. recall_input notes what it
    sent beyond the history and add_items skips it: each message is stored once, and no
    model call is sent one twice."""
    code = "my locker code is 4711, keep it"

    async def run() -> tuple[list[list[dict[str, Any]]], list[str]]:
        model = ScriptedModel()
        agent = Agent(name="clerk", instructions="You are a clerk.", model=model)
        session = MemevictSession("recalled-once", url=server.url, max_tokens=150)
        await session.clear_session()
        config = RunConfig(tracing_disabled=True, session_input_callback=session.recall_input)
        try:
            await Runner.run(agent, code, session=session, run_config=config)
            for i in range(20):
                said = f"let us chat about the weather, part {i}"
                await Runner.run(agent, said, session=session, run_config=config)
                await Runner.run(
                    agent, f"my locker code? ({i})", session=session, run_config=config
                )
            texts = []
            for tier in ("hot", "cold"):
                cursor = 0
                while True:
                    page = await session.store.scan(tier, cursor, 200)
                    texts += [m.text or "" for m in page.memories]
                    cursor = page.cursor
                    if cursor == 0:
                        break
            return model.inputs, texts
        finally:
            await session.clear_session()
            await session.close()

    inputs, texts = asyncio.run(run())
    assert sum(code in t for t in texts) == 1, [t for t in texts if code in t]
    assert len(texts) == len(set(texts))  # (every text said once, stored once)
    # recalled after it left the window, and then never twice in one call
    assert sum(code in json.dumps(i) for sent in inputs[6:] for i in sent) > 0
    for sent in inputs:
        shown = [json.dumps(i, sort_keys=True) for i in sent]
        assert len(shown) == len(set(shown)), shown
