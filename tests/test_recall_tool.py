"""recall_memory, the tool each adapter offers the model (issue 39, item 4), through each
real framework (scripted models, no network) on real servers.

A 40-turn conversation runs through a budget of 200 tokens, with three messages about
parcels early on and a log over the whole budget later. On the last turn the model calls
``recall_memory("parcel alpha")``: the parcel messages, out of what it is sent by then,
come back to it in conversation order (best first would put charlie before bravo). The
same tool with ``k=2`` returns two of them, with ``max_tokens=100`` a cut log in 100
tokens; queries with nothing to search for, or made of control characters, and a
conversation made with ``recall_share=0``, get a text saying why nothing is found. The
tool's own calls and answers are not found again.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest
from agents import Agent, ModelResponse, ModelSettings, RunConfig, Runner, Usage
from agents.models.interface import Model
from agents.tool import FunctionTool
from agents.tool_context import ToolContext
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic import Field
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import Tool
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.messages import ModelResponse as PydanticResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memevict.errors import BadArgument
from memevict.integrations._conversation import RECALL_OFF, approx_tokens
from memevict.integrations.langchain import MemevictMiddleware
from memevict.integrations.openai_agents import MemevictSession, read_item
from memevict.integrations.pydantic_ai import MemevictHistory, SyncMemevictHistory
from tests.servers import Server

TURNS = 40
BUDGET = 200  # tokens: about seven turns
PARCELS = {3: ("alpha", "Lisbon"), 12: ("bravo", "Oslo"), 21: ("charlie", "Quito")}
LOG_AT = 30  # a message over the whole budget: straight to the cold tier
ASK = "recall please"  # the model then calls recall_memory(QUERY)
QUERY = "parcel alpha"
# Queries with no word to search for, or none that any message holds.
BAD = [
    "",
    "  \n\t ",
    "the and of it",
    "\x00\x01\x02\x7f\ufffd\u200b",
    "\x00" * 1_000_000,
    "zqxj " * 200_000,
]
RUN = RunConfig(tracing_disabled=True)


def _user(turn: int) -> str:
    if turn in PARCELS:
        name, city = PARCELS[turn]
        return f"Parcel {name} left the {city} depot."
    if turn == LOG_AT:
        return "Shipment log: " + "line " * 1000  # ~1,250 tokens
    return f"tell me about order {turn}, " + "details " * 10


def _said(turn: int) -> str:
    return f"- user: {_user(turn)}"


def _check_recalled(answer: str) -> None:
    """The three parcel messages, oldest first, each as who said it and its text."""
    assert answer.startswith("Earlier messages of this conversation matching 'parcel alpha',")
    at = [answer.index(_said(turn)) for turn in PARCELS]
    assert at == sorted(at), answer
    assert len(answer.splitlines()) == 4, answer  # nothing else matches


def _check_evicted(sent: str) -> None:
    """What the model was sent when it called the tool holds none of the parcels."""
    assert "Parcel" not in sent and "order 39" in sent


def _check_caps(two: str, short: str) -> None:
    """``two``: recall_memory(QUERY) with k=2, the two best (alpha holds both words; of
    bravo and charlie, the newer) in conversation order. ``short``: the log, with
    max_tokens=100, cut to fit."""
    assert two.index(_said(3)) < two.index(_said(21)), two
    assert _said(12) not in two
    assert len(two.splitlines()) == 3, two
    assert "- user: Shipment log: line line" in short and short.endswith(" [cut]")
    assert 75 <= approx_tokens(short) <= 100  # (room kept for a "more left out" line)


def _check_nothing(answers: Sequence[str]) -> None:
    assert len(answers) == len(BAD)
    for answer in answers:
        assert answer.startswith("No earlier message of this conversation matches "), answer
        assert "- user:" not in answer and len(answer) < 300


# --- OpenAI Agents SDK ---------------------------------------------------------------


class SdkModel(Model):
    """Replies to a user message; to ASK, calls recall_memory(QUERY); to the tool's
    output, replies. Records the JSON of every input it is sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []

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
        self.sent.append(json.dumps([dict(i) for i in items]))
        n = len(self.sent)
        if items[-1].get("content") == ASK:
            args = json.dumps({"query": QUERY})
            call = ResponseFunctionToolCall(
                type="function_call", call_id=f"c{n}", name="recall_memory", arguments=args
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text=f"Noted, reply {n}.", annotations=[])
        reply = ResponseOutputMessage(
            id=f"msg-{n}", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[reply], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


async def _sdk_call(tool: FunctionTool, query: str) -> str:
    """The tool's answer to ``query``, called as the SDK calls a tool."""
    arguments = json.dumps({"query": query})
    context = ToolContext(
        context=None, tool_name=tool.name, tool_call_id="c0", tool_arguments=arguments
    )
    return str(await tool.on_invoke_tool(context, arguments))


def test_openai_agents_recall_memory(server: Server) -> None:
    url = f"redis://127.0.0.1:{server.port}"

    async def run() -> None:
        session = MemevictSession(f"recall-{secrets.token_hex(4)}", url=url, max_tokens=BUDGET)
        try:
            model = SdkModel()
            agent = Agent(name="clerk", model=model, tools=[session.recall_tool()])
            assert [t.name for t in agent.tools] == ["recall_memory"]
            for turn in range(TURNS):
                await Runner.run(agent, _user(turn), session=session, run_config=RUN)
            await Runner.run(agent, ASK, session=session, run_config=RUN)
            _check_evicted(model.sent[-2])
            output = json.loads(model.sent[-1])[-1]
            assert output["type"] == "function_call_output"
            _check_recalled(output["output"])
            two = await _sdk_call(session.recall_tool(k=2), QUERY)
            short = await _sdk_call(session.recall_tool(max_tokens=100), "shipment log")
            _check_caps(two, short)
            tool = session.recall_tool()
            _check_nothing([await _sdk_call(tool, query) for query in BAD])
            # (a lone surrogate, which no framework sends as JSON, is no word either)
            alone = await session.conversation.recall_memory("\ud800 \udfff", read_item)
            assert alone.startswith("No earlier message of this conversation matches '? ?'")
            with pytest.raises(BadArgument):
                session.recall_tool(k=0)
            await session.clear_session()
        finally:
            await session.close()

    asyncio.run(run())


def test_openai_agents_without_an_index(server: Server) -> None:
    url = f"redis://127.0.0.1:{server.port}"

    async def run() -> str:
        session = MemevictSession(f"off-{secrets.token_hex(4)}", url=url, recall_share=0)
        try:
            await session.add_items([{"role": "user", "content": _user(3)}])
            return await _sdk_call(session.recall_tool(), QUERY)
        finally:
            await session.clear_session()
            await session.close()

    assert asyncio.run(run()) == RECALL_OFF


# --- LangChain -----------------------------------------------------------------------


class ChatModel(BaseChatModel):
    """As SdkModel, for LangChain: records every message list it is sent."""

    sent: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[LanguageModelInput, Any]:
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
        if messages[-1].text == ASK:
            call = {"name": "recall_memory", "args": {"query": QUERY}, "id": f"c{n}"}
            reply = AIMessage(content="", tool_calls=[call])
        else:
            reply = AIMessage(content=f"Noted, reply {n}.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _thread(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


async def _langchain_call(tool: BaseTool, query: str, thread: str, aio: bool) -> str:
    """The tool's answer to ``query`` in ``thread``, as a LangChain tool is called."""
    if aio:
        return str(await tool.ainvoke({"query": query}, _thread(thread)))
    return str(tool.invoke({"query": query}, _thread(thread)))


@pytest.mark.parametrize("aio", [False, True], ids=["invoke", "ainvoke"])
def test_langchain_recall_memory(server: Server, aio: bool) -> None:
    url = f"redis://127.0.0.1:{server.port}"
    thread = f"recall-{secrets.token_hex(4)}"
    memory = MemevictMiddleware(url=url, max_tokens=BUDGET)
    model = ChatModel()
    agent = create_agent(
        model, tools=[memory.recall_tool()], middleware=[memory], checkpointer=InMemorySaver()
    )

    async def run() -> None:
        for text in [*map(_user, range(TURNS)), ASK]:
            state = {"messages": [HumanMessage(text)]}
            if aio:
                await agent.ainvoke(state, _thread(thread))
            else:
                agent.invoke(state, _thread(thread))
        _check_evicted("\n".join(m.text for m in model.sent[-2]))
        output = model.sent[-1][-1]
        assert isinstance(output, ToolMessage) and output.name == "recall_memory"
        _check_recalled(output.text)
        two = await _langchain_call(memory.recall_tool(k=2), QUERY, thread, aio)
        short = await _langchain_call(
            memory.recall_tool(max_tokens=100), "shipment log", thread, aio
        )
        _check_caps(two, short)
        tool = memory.recall_tool()
        _check_nothing([await _langchain_call(tool, query, thread, aio) for query in BAD])
        # another thread's namespace holds none of it
        other = await _langchain_call(tool, QUERY, "another thread", aio)
        assert other == "No earlier message of this conversation matches 'parcel alpha'."
        if aio:
            await memory.aclear_session(thread)
            await memory.aclose()
        else:
            memory.clear_session(thread)

    try:
        asyncio.run(run())
    finally:
        memory.close()


def test_langchain_without_an_index(server: Server) -> None:
    url = f"redis://127.0.0.1:{server.port}"
    thread = f"off-{secrets.token_hex(4)}"
    memory = MemevictMiddleware(url=url, recall_share=0)
    try:
        agent = create_agent(ChatModel(), middleware=[memory], checkpointer=InMemorySaver())
        agent.invoke({"messages": [HumanMessage(_user(3))]}, _thread(thread))
        answer = memory.recall_tool().invoke({"query": QUERY}, _thread(thread))
        memory.clear_session(thread)
    finally:
        memory.close()
    assert answer == RECALL_OFF


# --- Pydantic AI ---------------------------------------------------------------------


class Script:
    """As SdkModel, for Pydantic AI's FunctionModel."""

    def __init__(self) -> None:
        self.sent: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> PydanticResponse:
        self.sent.append(list(messages))
        last = messages[-1].parts[-1]
        if isinstance(last, UserPromptPart) and last.content == ASK:
            return PydanticResponse([ToolCallPart("recall_memory", {"query": QUERY})])
        return PydanticResponse([TextPart(f"Noted, reply {len(self.sent)}.")])


def _asker(query: str) -> Callable[[list[ModelMessage], AgentInfo], PydanticResponse]:
    """A model that calls recall_memory(query) and answers with what it returned."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> PydanticResponse:
        last = messages[-1].parts[-1]
        if isinstance(last, ToolReturnPart):
            return PydanticResponse([TextPart(str(last.content))])
        return PydanticResponse([ToolCallPart("recall_memory", {"query": query})])

    return model


async def _pydantic_call(tool: Tool[Any], query: str) -> str:
    """The tool's answer to ``query``, through a Pydantic AI agent's run (which runs a
    sync tool, and a sync processor, in a worker thread)."""
    agent = PydanticAgent(FunctionModel(_asker(query)), tools=[tool])
    return (await agent.run("go")).output


def _sent(messages: Sequence[ModelMessage]) -> str:
    return "\n".join(str(p) for m in messages for p in m.parts)


@pytest.mark.parametrize("aio", [False, True], ids=["sync", "async"])
def test_pydantic_ai_recall_memory(server: Server, aio: bool) -> None:
    url = f"redis://127.0.0.1:{server.port}"
    session = f"recall-{secrets.token_hex(4)}"

    async def run() -> None:
        kind = MemevictHistory if aio else SyncMemevictHistory
        history = kind.from_url(session, url, max_tokens=BUDGET)
        script = Script()
        agent = PydanticAgent(
            FunctionModel(script),
            tools=[history.recall_tool()],
            capabilities=[ProcessHistory(history)],
        )
        messages: list[ModelMessage] = []
        for text in [*map(_user, range(TURNS)), ASK]:
            result = await agent.run(text, message_history=messages)
            messages = result.all_messages()
        _check_evicted(_sent(script.sent[-2]))
        request = script.sent[-1][-1]
        assert isinstance(request, ModelRequest)
        output = request.parts[-1]
        assert isinstance(output, ToolReturnPart) and output.tool_name == "recall_memory"
        _check_recalled(str(output.content))
        two = await _pydantic_call(history.recall_tool(k=2), QUERY)
        short = await _pydantic_call(history.recall_tool(max_tokens=100), "shipment log")
        _check_caps(two, short)
        tool = history.recall_tool()
        _check_nothing([await _pydantic_call(tool, query) for query in BAD])
        if isinstance(history, MemevictHistory):
            await history.clear_session()
            await history.aclose()
        else:
            history.clear_session()
            history.close()

    asyncio.run(run())


def test_pydantic_ai_without_an_index(server: Server) -> None:
    url = f"redis://127.0.0.1:{server.port}"
    history = SyncMemevictHistory.from_url(f"off-{secrets.token_hex(4)}", url, recall_share=0)
    try:
        agent = PydanticAgent(FunctionModel(Script()), capabilities=[ProcessHistory(history)])
        agent.run_sync(_user(3))
        ask = PydanticAgent(FunctionModel(_asker(QUERY)), tools=[history.recall_tool()])
        answer = ask.run_sync("go").output
        history.clear_session()
    finally:
        history.close()
    assert answer == RECALL_OFF
