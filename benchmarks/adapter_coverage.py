"""Coverage through the real adapters: of a long conversation's questions, how many the
context an agent sends still answers, memevict against FIFO of the same token budget.

    python benchmarks/adapter_coverage.py [PATH ...] [--generated N]
        [--style prose|texting] [--adapters openai,langchain,pydantic-ai]
        [--budgets 2000,5000,10000] [--policy FIELD=VALUE ...] [--labeler NAME]
        [--token-weight X] [--url URL] [--per-question]
        [--query question,previous] [--json FILE]

PATH: a LoCoMo conversation, one sample (``speaker_a``, ``speaker_b``, ``session_N``,
``qa`` at the top level) or a list of samples (sessions under ``conversation``).
``--generated N``: also N conversations of memevict's own generator
(``memevict.simulate.sessions.generate_sessions(seed, 20, style=...)``, seeds 1..N;
``--style texting``: as people text). ``--token-weight X``: the adapters' ``token_weight``
(default: theirs).
``--policy FIELD=VALUE``: a Policy field passed to every adapter's constructor (repeatable).
``--labeler NAME``: the adapters' labeler, as ``memevict.importance.load_labeler`` reads it.
Without ``--url`` it starts a throwaway Valkey (the one the package ships) on a free
loopback port and removes it at exit; with one, it only touches namespaces of its own
(fresh, random) and drops them after each replay.

The replay. speaker_a (LoCoMo) or role "user" (generated) is the user, the other the
assistant; every turn is one message, consecutive turns of one speaker too. A model call
happens before each assistant message that follows user messages, and that message is
the model's answer; an assistant message with no user message before it (a session the
assistant opens) is added to the history without a call. Each adapter is given only
``max_tokens`` (and ``--policy``), a fresh session, and replays the whole conversation:

- openai: ``MemevictSession``, as ``Runner.run(agent, new_input, session=session)`` uses
  it (without the SDK): context = ``get_items()`` + the new user items, then
  ``add_items(new user items + [answer])``. Items are ``{"role", "content", "id"}``: the
  turn id rides in ``id``, which the adapter neither counts nor labels.
- langchain: ``MemevictMiddleware`` in a real ``create_agent`` with an ``InMemorySaver``
  and a thread id, its model a scripted chat model recording what it is sent; one
  ``invoke`` a call, its input the new messages (``id=`` the turn id).
- pydantic-ai: ``SyncMemevictHistory`` in ``ProcessHistory`` of a real ``Agent`` on a
  ``FunctionModel`` recording what it is sent; one ``run_sync(user text,
  message_history=previous.all_messages())`` a call. Of several user messages before one
  answer, the earlier ones go into ``message_history`` as requests of their own (the
  agent merges them with the new prompt, the processor splits them back), so every turn
  stays one message as in the other two.

The final context is that of one more call after the last turn, its user message "Do you
remember?" (which carries no evidence, and is not counted in the final context's size).

The measures, per conversation, adapter and budget (tokens: ``approx_tokens`` of the
text the model reads of a message, about 4 characters a token, the adapters' default):

- coverage: the share of the questions with at least one evidence turn in the final
  context (questions asked mid-conversation by the generator are scored at the end too);
- FIFO: the same for the newest turns whose tokens fit in the budget, and the ratio
  memevict / FIFO; lost / gained: questions FIFO covers and memevict not, and the reverse;
- max hist: the most tokens any call sent besides its current turn (the user messages
  new at that call); over budget when above the budget (flagged);
- recent: the share of calls whose context holds the previous exchange (the assistant
  message before the current user message, and the user message before that);
- msgs / tokens: the final context's size; s: the replay's wall time.
- with ``--per-question``: the OpenAI session replays the conversation (once with
  ``recall_share=0``, "off", once with the default, "on": recall of what matches the
  latest user message), then the share of questions with an evidence turn in the items
  ``get_items()`` returns, by ``--query`` (default both):

  - ``question``: each question added as a user item, ``get_items()`` read, the question
    popped (the query is the question; asking one evicts for its tokens, and popping it
    does not bring that back, so the questions are asked one after the other in that
    state, in the file's order);
  - ``previous`` (harder): ``get_items()`` read once, before any question is added (the
    query is the latest user message, the conversation's last): what the context holds
    when the question comes, the question not being its query.

  Against three baselines (``memevict.simulate.baselines``) over all the conversation's
  turns, in the budget less the question (``question``) or the whole budget
  (``previous``), with the same query: FIFO (the newest turns that fit), search alone
  (BM25 as the store's index ranks, best first, each turn taken while it fits) and
  FIFO + slice (FIFO in 1 - share of the budget, the best older matches in what it
  leaves), at shares 0.1, 0.2, 0.3: the share covering most questions over all the
  conversations, per budget, is shown (``share``), each share's count in the JSON. A
  row per conversation and budget (BELOW FIFO flagged), then the totals; ``on-srch``
  and ``on-slc``: recall on less search alone, less FIFO + slice, in points.

The total row of an adapter and budget: covered questions / all questions over all the
conversations. Evidence ids are normalised (LoCoMo's known defects: several ids in one
string, "D:11:26", leading zeros); ids naming no turn are dropped and counted, and a
question left without evidence is dropped (category 5, the adversarial questions, are
kept only where their evidence is valid).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import secrets
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _harness.py, when imported by a test

from _harness import Run, parser, server
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field
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

from memevict.importance import load_labeler
from memevict.integrations._conversation import approx_tokens
from memevict.integrations.langchain import MemevictMiddleware
from memevict.integrations.openai_agents import MemevictSession
from memevict.integrations.pydantic_ai import SyncMemevictHistory
from memevict.policy import Policy
from memevict.simulate.baselines import fifo, fifo_slice, search_alone
from memevict.simulate.locomo import read_locomo
from memevict.simulate.sessions import generate_sessions
from memevict.simulate.transcript import MemoryTurn, Transcript

ADAPTERS = ("openai", "langchain", "pydantic-ai")
BUDGETS = (2000, 5000, 10000)
QUERIES = ("question", "previous")  # --per-question's query kinds
SHARES = (0.1, 0.2, 0.3)  # of the budget, FIFO + slice's matches
FINAL = "final"  # the id of the final call's user message
FINAL_TEXT = "Do you remember?"
PolicyFields = dict[str, Any]  # Policy fields by name (their types vary)

# --- the adapters' constructors: the one place to update when their signatures change ---


def openai_session(
    url: str, session_id: str, max_tokens: int, policy: PolicyFields
) -> MemevictSession:
    return MemevictSession(session_id, url=url, max_tokens=max_tokens, **policy)


def langchain_middleware(
    url: str, max_tokens: int, policy: PolicyFields
) -> MemevictMiddleware[Any, Any]:
    # No session id: one namespace per thread, the middleware's default.
    return MemevictMiddleware(url=url, max_tokens=max_tokens, **policy)


def pydantic_history(
    url: str, session_id: str, max_tokens: int, policy: PolicyFields
) -> SyncMemevictHistory:
    return SyncMemevictHistory(session_id, url=url, max_tokens=max_tokens, **policy)


# --- conversations ----------------------------------------------------------------------

Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class Turn:
    id: str
    role: Role
    text: str


@dataclass(frozen=True, slots=True)
class Question:
    question: str
    evidence: tuple[str, ...]  # turn ids, any one answers it
    category: int | None = None


@dataclass
class Conversation:
    name: str
    turns: list[Turn]
    questions: list[Question]
    notes: dict[str, Any] = field(default_factory=dict)  # what reading it fixed or dropped


@dataclass(frozen=True, slots=True)
class Call:
    """One model call: assistant messages said without a call since the previous one
    (history), the user messages new at this call (the last is the current one), and the
    model's answer (None for the final call)."""

    prior: tuple[Turn, ...]
    users: tuple[Turn, ...]
    answer: Turn | None
    previous: tuple[str, ...]  # the previous exchange: assistant message, user message before


def read_path(path: Path) -> list[Conversation]:
    """A LoCoMo file's conversations, read by memevict.simulate.locomo (evidence defects
    fixed or dropped, and counted, there)."""
    return [conversation_of(t, path) for t in read_locomo(path)]


def conversation_of(transcript: Transcript, path: Path) -> Conversation:
    """A transcript read from ``path`` as a conversation: named by its file (one sample) or
    its sample id (a list)."""
    source = transcript.source
    name = path.stem if source == str(path) else source[len(str(path)) + 1 :]
    turns = [
        Turn(e.id, "user" if e.role == "user" else "assistant", e.text or "")
        for e in transcript.events
        if isinstance(e, MemoryTurn)
    ]
    questions = [
        Question(q.question, q.evidence, int(q.category) if q.category else None)
        for q in transcript.questions
    ]
    kept = Counter(q.category for q in questions)
    notes = {**dict(transcript.notes), "questions kept, by category": dict(kept)}
    return Conversation(name, turns, questions, notes)


def generated(seed: int, style: str = "prose") -> Conversation:
    """A conversation of memevict's multi-session generator (20 sessions)."""
    transcript = generate_sessions(seed, 20, style=style)
    turns = [
        Turn(e.id, "user" if e.role == "user" else "assistant", e.text or "")
        for e in transcript.events
        if isinstance(e, MemoryTurn)
    ]
    ids = {t.id for t in turns}
    questions = [
        Question(q.question, tuple(e for e in q.evidence if e in ids)) for q in transcript.questions
    ]
    dropped = sum(not q.evidence for q in questions)
    kept = [q for q in questions if q.evidence]
    notes = {"questions without valid evidence (dropped)": dropped} if dropped else {}
    return Conversation(f"generated-{seed}", turns, kept, notes)


def calls_of(turns: Sequence[Turn]) -> list[Call]:
    """The model calls of a replay, the final one included."""
    calls: list[Call] = []
    prior: list[Turn] = []
    users: list[Turn] = []
    asked: str | None = None  # the newest user message so far
    exchange: tuple[str, ...] = ()  # the newest assistant message and the user message before
    previous: tuple[str, ...] = ()  # the exchange before the coming call's first user message
    for turn in turns:
        if turn.role == "user":
            if not users:
                previous = exchange
            users.append(turn)
            asked = turn.id
            continue
        if users:
            calls.append(Call(tuple(prior), tuple(users), turn, previous))
            prior, users = [], []
        else:
            prior.append(turn)
        exchange = (turn.id,) if asked is None else (turn.id, asked)
    if not users:
        previous = exchange
    users.append(Turn(FINAL, "user", FINAL_TEXT))
    calls.append(Call(tuple(prior), tuple(users), None, previous))
    return calls


# --- the replays: each returns the turn ids the model was sent, call by call -----------


def _session_id(adapter: str) -> str:
    return f"coverage-{adapter}-{secrets.token_hex(6)}"


def _item(turn: Turn) -> dict[str, str]:
    return {"role": turn.role, "content": turn.text, "id": turn.id}


async def _replay_openai(
    calls: Sequence[Call], url: str, budget: int, policy: PolicyFields
) -> list[list[str]]:
    session = openai_session(url, _session_id("openai"), budget, policy)
    contexts: list[list[str]] = []
    try:
        for call in calls:
            if call.prior:
                await session.add_items([_item(t) for t in call.prior])
            new = [_item(t) for t in call.users]
            sent = await session.get_items() + new
            contexts.append([str(item.get("id")) for item in sent])
            if call.answer is not None:
                await session.add_items([*new, _item(call.answer)])
    finally:
        await session.clear_session()
        await session.close()
    return contexts


def replay_openai(
    calls: Sequence[Call], url: str, budget: int, policy: PolicyFields
) -> list[list[str]]:
    return asyncio.run(_replay_openai(calls, url, budget, policy))


class ScriptedChatModel(BaseChatModel):
    """Answers with the next of ``answers``; records every message list it is sent."""

    answers: list[AIMessage] = Field(default_factory=list)
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
        return ChatResult(generations=[ChatGeneration(message=self.answers.pop(0))])


def _message(turn: Turn) -> BaseMessage:
    if turn.role == "user":
        return HumanMessage(turn.text, id=turn.id)
    return AIMessage(turn.text, id=turn.id)


def replay_langchain(
    calls: Sequence[Call], url: str, budget: int, policy: PolicyFields
) -> list[list[str]]:
    middleware = langchain_middleware(url, budget, policy)
    model = ScriptedChatModel()
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    thread = _session_id("langchain")
    config: Any = {"configurable": {"thread_id": thread}}
    try:
        for call in calls:
            answer = call.answer or Turn("final-answer", "assistant", "Yes.")
            model.answers.append(AIMessage(answer.text, id=answer.id))
            # The assistant's messages said without a call go in with the new user messages.
            agent.invoke({"messages": [_message(t) for t in (*call.prior, *call.users)]}, config)
    finally:
        middleware.clear_session(thread)
        middleware.close()
    return [[str(m.id) for m in sent] for sent in model.sent]


def _us(moment: datetime) -> int:
    return round(moment.timestamp() * 1_000_000)


def _keys(message: ModelMessage) -> list[tuple[str, str, int]]:
    """What identifies each text of a message: its kind, text and timestamp (the texts of
    the conversation repeat: "Thanks!"; the timestamps survive the processor's storage)."""
    if isinstance(message, ModelResponse):  # (a part each: with recall, a response
        # brought back may sit next to another, and the model is sent them merged)
        at = _us(message.timestamp)
        return [("assistant", p.content, at) for p in message.parts if isinstance(p, TextPart)]
    return [
        ("user", str(p.content), _us(p.timestamp))
        for p in message.parts
        if isinstance(p, UserPromptPart)
    ]


def replay_pydantic_ai(
    calls: Sequence[Call], url: str, budget: int, policy: PolicyFields
) -> list[list[str]]:
    history_processor = pydantic_history(url, _session_id("pydantic-ai"), budget, policy)
    sent: list[list[ModelMessage]] = []
    answers: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(list(messages))
        return ModelResponse(parts=[TextPart(answers.pop(0))])

    agent = Agent(FunctionModel(model), capabilities=[ProcessHistory(history_processor)])
    turn_of: dict[tuple[str, str, int], str] = {}  # _keys -> turn id
    # A message brought back from the store (recall) may carry a timestamp no send of the
    # replay had: a text said once in the conversation is its turn whatever its timestamp.
    said = [t for c in calls for t in (*c.prior, *c.users, *([c.answer] if c.answer else []))]
    count = Counter((t.role, t.text) for t in said)
    by_text = {(t.role, t.text): t.id for t in said if count[(t.role, t.text)] == 1}
    history: list[ModelMessage] = []
    contexts: list[list[str]] = []

    def add(message: ModelMessage, turn: Turn) -> None:
        turn_of.update((key, turn.id) for key in _keys(message))
        history.append(message)

    try:
        for call in calls:
            for turn in call.prior:
                add(ModelResponse(parts=[TextPart(turn.text)]), turn)
            for turn in call.users[:-1]:
                add(ModelRequest(parts=[UserPromptPart(turn.text)]), turn)
            current = call.users[-1]
            answers.append(call.answer.text if call.answer else "Yes.")
            result = agent.run_sync(current.text, message_history=history)
            # The current prompt is the one text of what was sent not yet known.
            keys = [key for message in sent[-1] for key in _keys(message)]
            for key in keys:
                if key not in turn_of and key[0] == "user" and key[1] == current.text:
                    turn_of[key] = current.id
            contexts.append(
                [turn_of.get(key) or by_text.get(key[:2], f"?{key[1][:30]}") for key in keys]
            )
            history = result.all_messages()
            if call.answer is not None:
                turn_of.update((key, call.answer.id) for key in _keys(history[-1]))
    finally:
        history_processor.clear_session()
        history_processor.close()
    return contexts


async def _asked_openai(
    conversation: Conversation,
    url: str,
    budget: int,
    policy: PolicyFields,
    share: float | None,
    queries: Sequence[str],
) -> dict[str, list[bool]]:
    """Per question (--per-question): the conversation replayed through MemevictSession,
    then, by query kind, whether an evidence turn of each question is among the items:
    "previous", ``get_items()`` read once as the replay leaves it (its query: the latest
    user message, the conversation's last); then "question", each question added as a
    user item, ``get_items()`` read and the question popped."""
    fields: Any = {**policy, "recall_share": share}
    session = openai_session(url, _session_id("openai"), budget, fields)
    found: dict[str, list[bool]] = {}
    try:
        for call in calls_of(conversation.turns):
            if call.answer is None:
                break
            if call.prior:
                await session.add_items([_item(t) for t in call.prior])
            await session.get_items()
            await session.add_items([*(_item(t) for t in call.users), _item(call.answer)])
        if "previous" in queries:  # (first: asking a question evicts, popping it does not undo)
            held = {str(item.get("id")) for item in await session.get_items()}
            found["previous"] = covered(conversation.questions, list(held))
        if "question" in queries:
            found["question"] = []
            for i, q in enumerate(conversation.questions):
                await session.add_items([{"role": "user", "content": q.question, "id": f"q{i}"}])
                held = {str(item.get("id")) for item in await session.get_items()}
                found["question"].append(any(e in held for e in q.evidence))
                await session.pop_item()
    finally:
        await session.clear_session()
        await session.close()
    return found


def last_user_text(turns: Sequence[Turn]) -> str:
    """The conversation's last user message (the "previous" query), "" if none."""
    return next((t.text for t in reversed(turns) if t.role == "user"), "")


def baselines(
    conversation: Conversation, budget: int, query: str, shares: Sequence[float]
) -> dict[str, list[bool]]:
    """Per question, the baselines (memevict.simulate.baselines) of the query kind: FIFO,
    search alone and FIFO + slice at each share ("slice 0.1", ...). "question": the
    question the query, the budget less the question; "previous": the last user message
    the query, the whole budget."""
    messages = [(t.id, t.text) for t in conversation.turns]
    rows: dict[str, list[bool]] = {}
    for q in conversation.questions:
        text = q.question if query == "question" else last_user_text(conversation.turns)
        room = budget - approx_tokens(q.question) if query == "question" else budget
        contexts = {
            "fifo": fifo(messages, room, approx_tokens),
            "search": search_alone(messages, text, room, approx_tokens),
        }
        for share in shares:
            contexts[f"slice {share:g}"] = fifo_slice(messages, text, room, share, approx_tokens)
        for key, context in contexts.items():
            rows.setdefault(key, []).append(any(e in set(context) for e in q.evidence))
    return rows


PQ_HEADER = (
    f"{'conversation':<16} {'budget':>6} {'Q':>4} {'FIFO':>6} {'slice':>6} {'share':>5} "
    f"{'search':>6} {'off':>6} {'on':>6} {'on/FIFO':>7} {'on-srch':>7} {'on-slc':>7}"
)


def pq_row(name: str, budget: int, r: dict[str, Any]) -> str:
    """A --per-question row: shares of the questions, the margins in points."""
    n = r["questions"]

    def pct(key: str) -> str:
        return _fmt(100 * r[key] / n if n else None, 1)

    def points(key: str) -> str:
        return f"{100 * (r['recall_on'] - r[key]) / n:+.1f}" if n else "-"

    flags = []
    if r["recall_on"] < r["fifo"]:
        flags.append("BELOW FIFO")
    return (
        f"{name:<16} {budget:>6} {n:>4} {pct('fifo'):>6} {pct('fifo_slice'):>6} "
        f"{r['share']:>5g} {pct('search'):>6} {pct('recall_off'):>6} {pct('recall_on'):>6} "
        f"{_fmt(_ratio(r['recall_on'], r['fifo']), 2):>7} {points('search'):>7} "
        f"{points('fifo_slice'):>7}  {' '.join(flags)}"
    ).rstrip()


QUERY_NOTES = {
    "question": "the question as the query: added as a user item, get_items() read, popped; "
    "the baselines in the budget less the question",
    "previous": "harder: the last user message as the query: get_items() read once after "
    "the replay, the question not added; the baselines with that query in the whole budget",
}


def per_question(
    conversations: Sequence[Conversation],
    url: str,
    budgets: Sequence[int],
    policy: PolicyFields,
    queries: Sequence[str] = QUERIES,
    shares: Sequence[float] = SHARES,
) -> dict[str, Any]:
    """--per-question: through the OpenAI session, recall off and on, against FIFO, search
    alone and FIFO + slice (the share best over all conversations, per budget), per
    conversation and over all; a row per conversation and budget, then the totals."""
    found: dict[tuple[str, str, int], dict[str, list[bool]]] = {}  # (query, name, budget)
    for c in conversations:
        for budget in budgets:
            for query in queries:
                found[(query, c.name, budget)] = baselines(c, budget, query, shares)
            for side, share in (("recall_off", 0.0), ("recall_on", None)):
                asked = asyncio.run(_asked_openai(c, url, budget, policy, share, queries))
                for query in queries:
                    found[(query, c.name, budget)][side] = asked[query]
    report: dict[str, Any] = {"shares": list(shares)}
    for query in queries:
        print(f"\nPer question, through MemevictSession ({QUERY_NOTES[query]})")
        print(PQ_HEADER)
        rows, totals = [], []
        for budget in budgets:
            counts = {
                c.name: {k: sum(v) for k, v in found[(query, c.name, budget)].items()}
                for c in conversations
            }
            slices = {f"{x:g}": sum(n[f"slice {x:g}"] for n in counts.values()) for x in shares}
            best = max(shares, key=lambda x: (slices[f"{x:g}"], -x))
            for c in conversations:
                n = counts[c.name]
                r = _pq_counts(n, len(c.questions), best, shares)
                print(pq_row(c.name, budget, r), flush=True)
                rows.append({"conversation": c.name, "budget": budget, **r})
            summed = Counter[str]()
            for n in counts.values():
                summed.update(n)
            questions = sum(len(c.questions) for c in conversations)
            totals.append({"budget": budget, **_pq_counts(summed, questions, best, shares)})
        for t in totals:
            print(pq_row("TOTAL", t["budget"], t))
        report[query] = {"conversations": rows, "totals": totals}
    return report


def _pq_counts(
    n: Mapping[str, int], questions: int, best: float, shares: Sequence[float]
) -> dict[str, Any]:
    """A --per-question row's numbers: covered questions by context, FIFO + slice at the
    best share, and each share's."""
    return {
        "questions": questions,
        **{key: n[key] for key in ("fifo", "search", "recall_off", "recall_on")},
        "fifo_slice": n[f"slice {best:g}"],
        "share": best,
        "slices": {f"{x:g}": n[f"slice {x:g}"] for x in shares},
    }


REPLAYS: dict[str, Callable[[Sequence[Call], str, int, PolicyFields], list[list[str]]]] = {
    "openai": replay_openai,
    "langchain": replay_langchain,
    "pydantic-ai": replay_pydantic_ai,
}

# --- the measures -----------------------------------------------------------------------


def fifo_context(turns: Sequence[Turn], budget: int) -> list[str]:
    """The newest turns whose tokens fit in ``budget``, oldest first."""
    return fifo([(t.id, t.text) for t in turns], budget, approx_tokens)


def covered(questions: Sequence[Question], context: Sequence[str]) -> list[bool]:
    held = set(context)
    return [any(e in held for e in q.evidence) for q in questions]


def measure(
    conversation: Conversation,
    calls: Sequence[Call],
    contexts: Sequence[Sequence[str]],
    budget: int,
) -> dict[str, Any]:
    tokens = {t.id: approx_tokens(t.text) for t in conversation.turns}
    tokens[FINAL] = approx_tokens(FINAL_TEXT)
    unknown = sorted({id for c in contexts for id in c if id not in tokens})
    if len(contexts) != len(calls) or unknown:
        raise RuntimeError(f"{len(contexts)} contexts for {len(calls)} calls; unknown {unknown}")
    history = 0  # the most tokens a call sent besides its current turn
    recent: Counter[str] = Counter()  # calls holding the previous exchange, or a part of it
    for call, context in zip(calls, contexts, strict=True):
        current = {t.id for t in call.users}
        history = max(history, sum(tokens[id] for id in context if id not in current))
        if call.previous:
            held = [id in context for id in call.previous]
            recent.update(
                calls=1, both=all(held), assistant=held[0], user=len(held) == 2 and held[1]
            )
    final = [id for id in contexts[-1] if id != FINAL]
    memevict = covered(conversation.questions, final)
    fifo = covered(conversation.questions, fifo_context(conversation.turns, budget))
    return {
        "questions": len(memevict),
        "covered": sum(memevict),
        "fifo_covered": sum(fifo),
        "lost": [i for i, (m, f) in enumerate(zip(memevict, fifo, strict=True)) if f and not m],
        "gained": [i for i, (m, f) in enumerate(zip(memevict, fifo, strict=True)) if m and not f],
        "max_history_tokens": history,
        "over_budget": max(0, history - budget),
        "recent": recent["both"],
        "recent_calls": recent["calls"],
        # the two halves apart: the assistant message before the current user message, and
        # the user message before that (the first exchanges lack the latter)
        "recent_assistant": recent["assistant"],
        "recent_user": recent["user"],
        "final_messages": len(final),
        "final_tokens": sum(tokens[id] for id in final),
        "calls": len(calls),
    }


# --- running ----------------------------------------------------------------------------


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


HEADER = (
    f"{'conversation':<16} {'adapter':<11} {'budget':>6} {'Q':>4} {'cov':>6} {'FIFO':>6} "
    f"{'ratio':>6} {'lost':>4} {'gain':>4} {'max hist':>8} {'recent':>6} {'msgs':>5} "
    f"{'tokens':>6} {'s':>6}"
)


def row(name: str, adapter: str, budget: int, r: dict[str, Any]) -> str:
    flags = []
    if r["covered"] < r["fifo_covered"]:
        flags.append("BELOW FIFO")
    if r["over_budget"] > 0:
        flags.append("OVER BUDGET")
    return (
        f"{name:<16} {adapter:<11} {budget:>6} {r['questions']:>4} "
        f"{_fmt(_share(r['covered'], r['questions'])):>6} "
        f"{_fmt(_share(r['fifo_covered'], r['questions'])):>6} "
        f"{_fmt(_ratio(r['covered'], r['fifo_covered']), 2):>6} {len(r['lost']):>4} "
        f"{len(r['gained']):>4} {r['max_history_tokens']:>8} "
        f"{_fmt(_share(r['recent'], r['recent_calls'])):>6} {r['final_messages']:>5} "
        f"{r['final_tokens']:>6} {r['seconds']:>6.1f}  {' '.join(flags)}"
    ).rstrip()


def total(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def add(key: str) -> int:
        return sum(int(r[key]) for r in results)

    return {
        "questions": add("questions"),
        "covered": add("covered"),
        "fifo_covered": add("fifo_covered"),
        "lost": [i for r in results for i in r["lost"]],
        "gained": [i for r in results for i in r["gained"]],
        "max_history_tokens": max(r["max_history_tokens"] for r in results),
        "over_budget": max(r["over_budget"] for r in results),
        "recent": add("recent"),
        "recent_calls": add("recent_calls"),
        "recent_assistant": add("recent_assistant"),
        "recent_user": add("recent_user"),
        "final_messages": add("final_messages"),
        "final_tokens": add("final_tokens"),
        "calls": add("calls"),
        "seconds": sum(r["seconds"] for r in results),
    }


def parse_policy(pairs: Sequence[str]) -> PolicyFields:
    """``FIELD=VALUE`` pairs as Policy fields of their declared types (or ``recent``,
    the adapters' count of recent messages sent whatever their rank)."""
    types = {f.name: str(f.type) for f in dataclasses.fields(Policy)} | {"recent": "int"}
    policy: PolicyFields = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        if name not in types or not value:
            raise SystemExit(f"--policy {pair!r}: expected FIELD=VALUE, FIELD a Policy field")
        kind = types[name]
        policy[name] = int(value) if kind == "int" else float(value) if kind == "float" else value
    return policy


def _numbers(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    cli = parser(__doc__)
    cli.add_argument("paths", nargs="*", type=Path, help="LoCoMo JSON files")
    cli.add_argument("--generated", type=int, default=0, help="N generated conversations")
    cli.add_argument("--style", choices=("prose", "texting"), default="prose")
    cli.add_argument(
        "--token-weight", type=float, help="the adapters' token_weight (0..1; default theirs)"
    )
    cli.add_argument("--adapters", default=",".join(ADAPTERS))
    cli.add_argument("--budgets", type=_numbers, default=list(BUDGETS))
    cli.add_argument("--policy", action="append", default=[], metavar="FIELD=VALUE")
    cli.add_argument(
        "--labeler", help="the adapters' labeler: 'rules' or module:callable (load_labeler)"
    )
    cli.add_argument("--url", help="a server (default: a throwaway Valkey of its own)")
    cli.add_argument(
        "--per-question",
        action="store_true",
        help="also each question asked through the OpenAI session, recall off and on",
    )
    cli.add_argument(
        "--query",
        default=",".join(QUERIES),
        help="--per-question's queries: question (the question), previous (the last user "
        "message, the question not added), or both, comma-separated",
    )
    args = cli.parse_args(argv)
    args.adapters = [a for a in args.adapters.split(",") if a]
    unknown = set(args.adapters) - set(ADAPTERS)
    if unknown or not args.adapters:
        cli.error(f"--adapters: choose from {', '.join(ADAPTERS)}")
    if not args.paths and args.generated <= 0:
        cli.error("give LoCoMo files, --generated N, or both")
    if not args.budgets or min(args.budgets) <= 0:
        cli.error("--budgets: positive token counts")
    if args.token_weight is not None and not 0 <= args.token_weight <= 1:
        cli.error("--token-weight: a number in [0, 1]")
    args.query = [q for q in args.query.split(",") if q]
    if not args.query or set(args.query) - set(QUERIES):
        cli.error(f"--query: choose from {', '.join(QUERIES)}, comma-separated")
    return args


def describe(conversation: Conversation, calls: Sequence[Call]) -> str:
    users = sum(t.role == "user" for t in conversation.turns)
    lines = [
        f"{conversation.name}: {len(conversation.turns)} turns ({users} user), "
        f"{len(calls)} model calls, {len(conversation.questions)} questions, "
        f"{sum(approx_tokens(t.text) for t in conversation.turns)} tokens"
    ]
    for key, value in conversation.notes.items():
        if value:
            shown = value if not isinstance(value, list) else f"{len(value)} {value}"
            lines.append(f"  {key}: {shown}")
    return "\n".join(lines)


def coverage(args: argparse.Namespace, out: Run) -> dict[str, Any]:
    policy = parse_policy(args.policy)
    if args.labeler:
        policy["labeler"] = load_labeler(args.labeler)
    if args.token_weight is not None:
        policy["token_weight"] = args.token_weight
    conversations = [c for path in args.paths for c in read_path(path)]
    conversations += [generated(seed, args.style) for seed in range(1, args.generated + 1)]
    report: dict[str, Any] = {
        "adapters": args.adapters,
        "budgets": args.budgets,
        "policy": {k: v for k, v in policy.items() if k != "labeler"},
        "labeler": args.labeler or "rules",
        "final_message": FINAL_TEXT,
        "conversations": [],
        "totals": [],
    }
    print("Category 5 (adversarial) questions are kept only where their evidence is valid.")
    results: dict[tuple[str, int], list[dict[str, Any]]] = {}
    started = time.perf_counter()
    with server(args.url, flush=False) as found:
        out.on(found)
        url = found.url
        for conversation in conversations:
            calls = calls_of(conversation.turns)
            print(describe(conversation, calls))
            print(HEADER)
            replays = []
            for budget in args.budgets:
                for adapter in args.adapters:
                    begun = time.perf_counter()
                    contexts = REPLAYS[adapter](calls, url, budget, policy)
                    result = measure(conversation, calls, contexts, budget)
                    result["seconds"] = time.perf_counter() - begun
                    print(row(conversation.name, adapter, budget, result), flush=True)
                    replays.append({"adapter": adapter, "budget": budget, **result})
                    results.setdefault((adapter, budget), []).append(result)
            print()
            report["conversations"].append(
                {
                    "name": conversation.name,
                    "turns": len(conversation.turns),
                    "questions": len(conversation.questions),
                    "notes": conversation.notes,
                    # lost and gained name these by index
                    "question_list": [dataclasses.asdict(q) for q in conversation.questions],
                    "replays": replays,
                }
            )
    print("Total (covered questions / all questions, over all conversations)")
    print(HEADER)
    for budget in args.budgets:
        for adapter in args.adapters:
            summed = total(results[(adapter, budget)])
            print(row("TOTAL", adapter, budget, summed))
            report["totals"].append({"adapter": adapter, "budget": budget, **summed})
    if args.per_question:
        with server(args.url, flush=False) as found:
            report["per_question"] = per_question(
                conversations, found.url, args.budgets, policy, args.query
            )
    report["seconds"] = time.perf_counter() - started
    print(f"\n{report['seconds']:.0f} s in all")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    out = Run(args)
    report = coverage(args, out)
    ratios = []
    for budget in args.budgets:
        found = [
            t["covered"] / t["fifo_covered"]
            for t in report["totals"]
            if t["budget"] == budget and t["fifo_covered"]
        ]
        spread = f"{min(found):.2f}..{max(found):.2f}" if found else "-"
        ratios.append(f"{budget:,} tokens {spread}x")
    out.row(
        "Coverage through the adapters",
        f"memevict ÷ FIFO over {len(report['conversations'])} conversations, "
        f"{', '.join(args.adapters)}: " + ", ".join(ratios),
    )
    out.finish(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
