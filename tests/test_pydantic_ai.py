"""MemevictHistory under a real Pydantic AI Agent, with a scripted FunctionModel (no network).

A 200-turn conversation with tool calls (some failing: ModelRetry, ToolFailed) runs through a
small token budget, each turn a new run continuing the last one's messages. Every history the
processor returns and every message list the model is sent is checked: each tool call with
its return right after it and no return without its call, the history within the budget but
for the current turn, and the user's standing instruction from turn 0 still there at the end.
The same conversation through a FIFO processor with the same budget loses it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import pytest
import redis.asyncio
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.capabilities import HistoryProcessor, ProcessHistory
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memevict.integrations._conversation import approx_tokens
from memevict.integrations.pydantic_ai import MemevictHistory, SyncMemevictHistory, text_of
from tests.cluster import Cluster
from tests.servers import Server

TURNS = 200
BUDGET = 900  # tokens of what the model reads: a dozen or two messages
INSTRUCTION = "From now on, always answer in French and sign as Bob."
History = list[ModelMessage]


def _tokens(messages: Sequence[ModelMessage]) -> int:
    return sum(approx_tokens(text_of(m)) for m in messages)


def _calls(message: ModelMessage) -> list[str]:
    if not isinstance(message, ModelResponse):
        return []
    return [p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart)]


def _returns(message: ModelMessage) -> list[str]:
    if not isinstance(message, ModelRequest):
        return []
    return [p.tool_call_id for p in message.parts if isinstance(p, ToolReturnPart)]


def _prompts(message: ModelMessage) -> list[str]:
    if not isinstance(message, ModelRequest):
        return []
    return [str(p.content) for p in message.parts if isinstance(p, UserPromptPart)]


class Script:
    """The model: a user prompt asking for a lookup gets a tool call, anything else (a
    tool's return among them) a reply. Records every message list it is sent.

    The last part of the last message is what it answers: Pydantic AI merges consecutive
    requests before sending them, tool returns first."""

    def __init__(self) -> None:
        self.sent: list[History] = []

    def __call__(self, messages: History, info: AgentInfo) -> ModelResponse:
        self.sent.append(list(messages))
        last = messages[-1].parts[-1]
        if isinstance(last, UserPromptPart) and "lookup" in str(last.content):
            order = str(last.content).split()[2]
            return ModelResponse([ToolCallPart("lookup", {"q": f"order {order}"})])
        return ModelResponse([TextPart(f"Noted, reply {len(self.sent)}.")])


def lookup(q: str) -> str:
    """Looks an order up."""
    n = int(q.split()[-1])
    if n % 10 == 0:
        raise ModelRetry(f"lookup failed: connection refused for {q}")
    if n % 7 == 0:
        raise ToolFailed(f"lookup failed: no order {n}")
    return f"order {n}: shipped, " + "details " * 20


HUGE_AT, FLUSH_AT = 51, 120  # a message over the whole budget; the server flushed


def _user(turn: int) -> str:
    if turn == 0:
        return INSTRUCTION
    if turn == HUGE_AT:
        return "Here is the whole log: " + "line of the log " * BUDGET  # ~4x the budget
    if turn % 2 == 0:
        return f"Please lookup {turn} for me."
    return f"ok thanks, turn {turn}"


def fifo(budget: int) -> Callable[[History], History]:
    """The comparison: keeps the newest messages that fit in the budget (the last message
    always), a tool call's response and the request answering it kept or dropped together."""

    def process(messages: History) -> History:
        units: list[History] = []
        for message in messages:
            if _returns(message) and units and _calls(units[-1][-1]):
                units[-1].append(message)
            else:
                units.append([message])
        kept: History = []
        for unit in reversed(units):
            if kept and _tokens(kept) + _tokens(unit) > budget:
                break
            kept[:0] = unit
        return kept

    return process


class Recorder:
    """A processor that records what the processor under it returns."""

    def __init__(self, process: Callable[[History], History]) -> None:
        self.process = process
        self.outputs: list[History] = []

    def __call__(self, messages: History) -> History:
        out = self.process(messages)
        self.outputs.append(out)
        return out


def _agent(
    script: Script,
    processor: HistoryProcessor[None],
    *,
    instructions: str | None = None,
    system_prompt: Sequence[str] = (),
    dynamic: bool = False,
) -> Agent[None, str]:
    agent = Agent(
        FunctionModel(script),
        instructions=instructions,
        system_prompt=system_prompt,
        tools=[lookup],
        capabilities=[ProcessHistory(processor)],
    )
    if dynamic:  # a system prompt rendered again on every run, different each time
        runs = iter(range(10**6))

        @agent.system_prompt(dynamic=True)
        def clock() -> str:
            return f"You are a clerk. This is run {next(runs)}."

    return agent


def _check_pairs(messages: History) -> None:
    """Every tool call is answered by the next message, and every answer follows its call."""
    for i, message in enumerate(messages):
        if _calls(message):
            assert i + 1 < len(messages), messages
            assert sorted(_returns(messages[i + 1])) == sorted(_calls(message)), messages
        if _returns(message):
            assert i > 0 and sorted(_calls(messages[i - 1])) == sorted(_returns(message))


def _current(messages: History) -> History:
    """What the processor always sends: the last message, the latest user prompt, the
    tool calls they answer, and the first message if it holds the system prompt."""
    keep = {len(messages) - 1}
    keep.update([i for i, m in enumerate(messages) if _prompts(m)][-1:])
    keep.update(i - 1 for i in list(keep) if _returns(messages[i]))
    if any(isinstance(p, SystemPromptPart) for p in messages[0].parts):
        keep.add(0)
    return [messages[i] for i in sorted(keep)]


def _check_budget(outputs: list[History]) -> None:
    for out in outputs:
        current = _current(out)
        if _tokens(current) > BUDGET:
            assert out == current
        else:
            assert _tokens(out) <= BUDGET, (_tokens(out), out)


def _holds_instruction(messages: History) -> bool:
    return any(INSTRUCTION in p for m in messages for p in _prompts(m))


async def _converse(
    agent: Agent[None, str],
    turns: int = TURNS,
    flush: Callable[[], Awaitable[object]] | None = None,
) -> int:
    """Runs the conversation; the number of messages it made."""
    history: History = []
    made = 0
    for turn in range(turns):
        if turn == FLUSH_AT and flush is not None:
            await flush()
        result = await agent.run(_user(turn), message_history=history)
        made += len(result.new_messages())
        history = result.all_messages()
    return made


def _once(messages: History) -> None:
    """No user prompt is sent twice (a request stored again under a new id would be)."""
    prompts = [p for m in messages for p in _prompts(m)]
    assert len(prompts) == len(set(prompts)), prompts


def test_a_200_turn_agent_keeps_pairs_the_budget_and_the_instruction(server: Server) -> None:
    url = f"redis://127.0.0.1:{server.port}"

    async def run() -> tuple[Script, list[History]]:
        memevict = MemevictHistory("pa-200", url=url, max_tokens=BUDGET)
        outputs: list[History] = []

        async def recording(messages: History) -> History:
            out = await memevict(messages)
            outputs.append(out)
            return out

        try:
            await memevict.clear_session()
            script = Script()
            made = await _converse(_agent(script, recording, instructions="You are a clerk."))
            stats = await memevict.store.stats()
            assert stats.cold > 0  # messages were evicted, and kept recallable
            # the last run's reply is made after its last call: stored on the next one
            assert stats.hot + stats.cold == made - 1  # each message stored once
            return script, outputs
        finally:
            await memevict.aclose()

    script, outputs = asyncio.run(run())
    assert len(script.sent) == TURNS + TURNS // 2 - 1  # a tool round trip on even turns but 0
    assert any("lookup failed" in text_of(m) for m in script.sent[-1] + script.sent[-2])
    for messages in outputs + script.sent:
        _check_pairs(messages)
        _once(messages)
    _check_budget(outputs)
    assert sum(len(out) for out in outputs) / len(outputs) > 6  # a window, not just the turn
    assert _holds_instruction(script.sent[-1])
    assert _holds_instruction(outputs[-1])


@pytest.mark.slow  # (a replica, or a 200-turn agent: seconds)
def test_a_200_turn_agent_through_an_over_budget_message_a_flush_and_a_dynamic_prompt(
    server: Server,
) -> None:
    """A message over the whole budget at turn 51 (sent as the current turn, then kept in
    the cold tier: no OverBudget), the server flushed at turn 120 (the processor stores
    again what the run's history holds) and a system prompt rendered anew on every run
    (the first request keeps its id: no message is stored or sent twice)."""
    url = f"redis://127.0.0.1:{server.port}"

    async def run() -> tuple[Script, list[History]]:
        memevict = MemevictHistory("pa-200-events", url=url, max_tokens=BUDGET)
        flusher = redis.asyncio.Redis.from_url(url)
        outputs: list[History] = []

        async def recording(messages: History) -> History:
            out = await memevict(messages)
            outputs.append(out)
            return out

        try:
            await memevict.clear_session()
            script = Script()
            agent = _agent(script, recording, system_prompt=["You are a clerk."], dynamic=True)
            await _converse(agent, flush=flusher.flushdb)
            return script, outputs
        finally:
            await memevict.aclose()
            await flusher.aclose()

    script, outputs = asyncio.run(run())
    for messages in outputs + script.sent:
        _check_pairs(messages)
        _once(messages)
    _check_budget(outputs)
    huge = next(i for i, sent in enumerate(script.sent) if _user(HUGE_AT) in _prompts(sent[-1]))
    assert _holds_instruction(script.sent[huge + 1])  # it evicted nothing
    assert not any(_user(HUGE_AT) in _prompts(m) for m in script.sent[huge + 1])  # cold
    after = next(i for i, s in enumerate(script.sent) if f"turn {FLUSH_AT + 1}" in str(s[-1]))
    assert _holds_instruction(script.sent[after])  # stored again after the flush
    assert _holds_instruction(script.sent[-1])
    # every run sends the system prompt of that run, once: no stale ones
    for sent in script.sent:
        prompts = [p.content for m in sent for p in m.parts if isinstance(p, SystemPromptPart)]
        assert len(prompts) == 2 and prompts[0] == "You are a clerk.", prompts


@pytest.mark.slow  # (a 200-turn agent: seconds)
def test_the_same_200_turns_through_fifo_lose_the_instruction() -> None:
    """The comparison (no server: once, not on each server's leg)."""
    fifo_script, fifo_processor = Script(), Recorder(fifo(BUDGET))
    agent = _agent(fifo_script, fifo_processor, instructions="You are a clerk.")
    asyncio.run(_converse(agent))
    for messages in fifo_processor.outputs:
        _check_pairs(messages)
    assert not _holds_instruction(fifo_script.sent[-1])
    assert len(fifo_script.sent[-1]) > 6  # FIFO kept a window too, just the wrong one


def test_the_sync_processor_keeps_the_system_prompt_first(server: Server) -> None:
    url = f"redis://127.0.0.1:{server.port}"
    memevict = SyncMemevictHistory(session_id="pa-sync", url=url, max_tokens=BUDGET)
    try:
        memevict.clear_session()
        script, recorder = Script(), Recorder(memevict)
        agent = _agent(script, recorder, system_prompt="You are a clerk.")
        history: History = []
        for turn in range(1, 61):
            result = agent.run_sync(_user(turn), message_history=history)
            history = result.all_messages()
        assert memevict.store.stats().cold > 0
    finally:
        memevict.close()
    for out in recorder.outputs:
        _check_pairs(out)
        assert isinstance(out[0], ModelRequest)
        assert [p.content for p in out[0].parts if isinstance(p, SystemPromptPart)] == [
            "You are a clerk."
        ]
    _check_budget(recorder.outputs)
    assert len(script.sent) > 60


def test_a_new_processor_reads_older_messages_back_from_the_store(server: Server) -> None:
    url = f"redis://127.0.0.1:{server.port}"

    async def run() -> None:
        first = MemevictHistory(session_id="pa-new", url=url, max_tokens=BUDGET)
        try:
            await first.clear_session()
            agent = _agent(Script(), first)
            result = await agent.run(INSTRUCTION)
            await agent.run("Please lookup 3 for me.", message_history=result.all_messages())
        finally:
            await first.aclose()
        # Another process, and a history that starts afresh: the window brings back the
        # instruction (whitelisted) and the tool round trip, in time order, before the turn.
        second = MemevictHistory(session_id="pa-new", url=url, max_tokens=BUDGET)
        try:
            turn: History = [ModelRequest.user_text_prompt("hello again")]
            out = await second(turn)
            assert out[-1] is turn[0]
            assert _prompts(out[0]) == [INSTRUCTION]
            assert [p for m in out for p in _prompts(m)] == [
                INSTRUCTION,
                "Please lookup 3 for me.",
                "hello again",
            ]
            _check_pairs(out)
            assert any("order 3: shipped" in text_of(m) for m in out)
        finally:
            await second.aclose()

    asyncio.run(run())


def test_a_cluster_url_sync_and_async(cluster: Cluster) -> None:
    url = cluster.stable_url()
    sync = SyncMemevictHistory(session_id="pa-cluster-sync", url=url, max_tokens=BUDGET)
    try:
        sync.clear_session()
        recorder = Recorder(sync)
        agent = _agent(Script(), recorder, instructions="You are a clerk.")
        history: History = []
        for turn in range(60):
            history = agent.run_sync(_user(turn), message_history=history).all_messages()
        assert sync.store.stats().cold > 0
    finally:
        sync.close()
    assert _holds_instruction(recorder.outputs[-1])

    async def run() -> list[History]:
        processor = MemevictHistory(session_id="pa-cluster-async", url=url, max_tokens=BUDGET)
        outputs: list[History] = []

        async def recording(messages: History) -> History:
            outputs.append(await processor(messages))
            return outputs[-1]

        try:
            await processor.clear_session()
            await _converse(_agent(Script(), recording, instructions="You are a clerk."), 30)
            return outputs
        finally:
            await processor.aclose()

    outputs = asyncio.run(run())
    for messages in outputs:
        _check_pairs(messages)
    assert _holds_instruction(outputs[-1])
