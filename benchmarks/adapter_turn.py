"""An agent turn through each framework adapter: a git revision's memevict (the base,
b130e70 by default) against the working tree's (HEAD), and the OpenAI Agents SDK's own
RedisSession as a peer, in one run.

    python benchmarks/adapter_turn.py [URL] [--base REV] [--turns 200] [--rounds 20]
        [--warm 60] [--json FILE]

A turn at steady state: max_tokens=2000, each message 20-60 words of varied English text
(seeded, the same on both sides), importance from the default labeler (the rules), the
history already past the budget (``--warm`` turns first, untimed: 60 turns of two
messages are about 3x the budget). What a turn is, per adapter:

- openai: ``MemevictSession``; ``items = await session.get_items()``, then
  ``await session.add_items([user_item, assistant_item])``.
- openai-runner: the same, as the Agents SDK's ``Runner.run`` (0.24) really calls a session
  in a turn without tools: ``get_items()``, ``add_items([user_item])`` before the model
  call, ``add_items([assistant_item])`` after it.
- langchain: ``MemevictMiddleware(namespace=...)`` (one namespace: no thread id needed);
  one ``wrap_model_call`` with a real ``ModelRequest`` whose messages are the thread's
  whole history (the graph state, growing by two messages a turn) plus the new
  ``HumanMessage``, all with ids; the handler returns a prepared ``AIMessage``.
- pydantic-ai: ``SyncMemevictHistory`` called with the run's history (the previous
  output and its ``ModelResponse``, merged by ``repair_messages`` as an Agent run
  merges consecutive requests at its start, plus the new ``ModelRequest``), then the
  ``ModelResponse`` appended to its output.

RedisSession runs the two openai flows (``RedisSession.from_url``); its history is not
trimmed: it returns every item (warm-up's 120 and two more a turn), so its turn grows with
the conversation where memevict's stays at the budget's ~30 items: the memevict /
RedisSession ratio depends on ``--warm`` and ``--turns``.

Each round runs one process per side (the order alternating): both import ``memevict``,
the base from ``git archive REV loader lua`` on PYTHONPATH. Each process runs every flow
(the order rotating by round) on sessions of its own, RedisSession too, and reports per
flow:

- µs/turn: the median over the turns of the wall clock of one turn (client and server);
- server µs/turn: INFO commandstats' usec of the entry-level commands over the timed turns,
  per turn. Entry-level: the commands the client sends outside a MULTI block (FCALL,
  FCALL_RO, EVALSHA, EVALSHA_RO for memevict); a script's inner commands have lines of
  their own in commandstats, as do a transaction's queued commands, whose time EXEC
  includes, and are not added;
- cmds/turn: the commands the client sends, counted on the server: commandstats calls of
  every command name the client sent (which redis-py's connection reports to this
  script). A script's inner commands are not among them unless the client also sends
  that command itself; the client's own count is compared and a difference printed;
- trips/turn: network round trips counted in redis-py (one write of packed commands, then
  their replies): a pipelined MULTI..EXEC is one trip of several commands; median over
  the turns (the mean where it differs);
- sent: the median number of items (messages) the turn hands the model.

Medians over rounds, and HEAD / base paired by round; memevict / RedisSession turns per
second paired within a process (the same moment). Without URL it runs on an embedded
Valkey. Given one it FLUSHES that server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASE = "b130e70"
MAX_TOKENS = 2000
SIDES = ("base", "HEAD")
MEMEVICT = "memevict"
REDIS_SESSION = "RedisSession"
FLOWS = ("openai", "openai-runner", "langchain", "pydantic-ai")
PEER_FLOWS = ("openai", "openai-runner")  # RedisSession's

# --- text: 20-60 words of varied English, the same for both sides of a round ----------

NAMES = ["Anna", "Marco", "Priya", "Tomas", "Lena", "Kofi", "Sofia", "Daniel", "Mei", "Omar"]
PLACES = ["Lisbon", "Porto", "Kyoto", "Denver", "Nairobi", "Oslo", "Toronto", "Seville"]
MONTHS = ["January", "March", "June", "August", "October", "December"]
THINGS = ["the garden shed", "a used bicycle", "the kitchen table", "an old camera", "a tent"]
HOBBIES = ["hiking", "pottery", "chess", "baking sourdough", "cycling", "birdwatching"]
TOPICS = ["the quarterly report", "the migration plan", "the onboarding guide", "the API"]
WORK = ["invoice", "budget", "contract", "refund", "deposit", "quote", "deadline"]
USER = [
    "My sister {name} is moving to {place} in {month} and I promised to help her pack.",
    "I have been learning {hobby} for about {n} weeks now and I really enjoy it.",
    "Yesterday I fixed {thing} with {name}, which took most of the afternoon.",
    "Can you remind me what we decided about {topic} last time?",
    "The {work} for the {place} office is ${n},200 and it is due on {month} {day}.",
    "We are thinking of spending a long weekend in {place} with the kids.",
    "I don't really like crowded places, so a quiet hotel would be better.",
    "What would be a good way to explain {topic} to someone new on the team?",
    "Our team lead {name} wants the draft of {topic} before the end of the week.",
    "I found {thing} in the garage and I am not sure whether to keep it or sell it.",
    "Honestly the weather has been strange lately, warm one day and cold the next.",
    "Is there anything else I should check before I send the {work} to {name}?",
    "My favourite part of the trip to {place} was the morning market by the river.",
    "I bought {n} new plants for the balcony, mostly herbs and a small lemon tree.",
]
ASSISTANT = [
    "Sure, here is a short summary of what we discussed about {topic} so far.",
    "The main point is that the {work} has to be approved by {name} before {month} {day}.",
    "In short, the plan for {place} looks reasonable if you book the train early.",
    "That sounds like a lot of fun, and {hobby} is a great way to relax after work.",
    "The fix is to split {topic} into smaller sections and review each one separately.",
    "I would start with the questions people ask most often and add examples later.",
    "It turns out the cheapest option is to travel on a weekday, around {n} percent less.",
    "You could ask {name} for the latest numbers, since they changed in {month}.",
    "A quiet place near the old town in {place} would be a good compromise for everyone.",
    "If you keep {thing}, it may be worth cleaning it and checking the parts first.",
    "Overall, this means you have about {n} days left to finish the draft comfortably.",
    "Let me know if you want me to turn this into a checklist you can share.",
    "One more thing to consider is the cost of shipping, which can add up quickly.",
    "This suggests the {work} was sent to the wrong address, so it is worth a call.",
]


def _sentence(rng: random.Random, templates: Sequence[str]) -> str:
    return rng.choice(templates).format(
        name=rng.choice(NAMES),
        place=rng.choice(PLACES),
        month=rng.choice(MONTHS),
        day=rng.randint(1, 28),
        n=rng.randint(2, 40),
        thing=rng.choice(THINGS),
        hobby=rng.choice(HOBBIES),
        topic=rng.choice(TOPICS),
        work=rng.choice(WORK),
    )


def message(rng: random.Random, templates: Sequence[str]) -> str:
    """20-60 words: whole sentences until a drawn length is reached, cut at 60 words."""
    target, words = rng.randint(20, 60), list[str]()
    while len(words) < target:
        words += _sentence(rng, templates).split()
    text = " ".join(words[:60])
    return text if text.endswith((".", "?")) else text + "."


def exchanges(round_no: int, flow: str) -> Callable[[int], tuple[str, str]]:
    """The i-th exchange (user text, assistant text) of a flow in a round."""
    cache: list[tuple[str, str]] = []
    rng = random.Random(f"adapter-turn {round_no} {flow}")

    def get(i: int) -> tuple[str, str]:
        while len(cache) <= i:
            cache.append((message(rng, USER), message(rng, ASSISTANT)))
        return cache[i]

    return get


# --- what the client sends: counted in redis-py's connections ---------------------------


def _name(args: Sequence[Any]) -> str:
    """A command's commandstats name: ``fcall``, ``config|resetstat``..."""

    def text(x: Any) -> str:
        return (x.decode() if isinstance(x, bytes | bytearray) else str(x)).lower()

    name = text(args[0]).split()[0] if args else "?"
    if name in ("config", "client", "function", "script", "memory", "object") and len(args) > 1:
        name += "|" + text(args[1])
    return name


@dataclass
class Wire:
    """Round trips (writes of packed commands) and commands, by name: those sent
    outside a MULTI block (``top``) and those queued in one (``queued``)."""

    on: bool = False
    trips: int = 0
    top: Counter[str] = field(default_factory=Counter)
    queued: Counter[str] = field(default_factory=Counter)
    detail: Counter[str] = field(default_factory=Counter)  # FCALL*: with the function's name

    def names(self, commands: Sequence[Sequence[Any]]) -> None:
        if not self.on:
            return
        inside = False
        for args in commands:
            name = _name(args)
            if name == "multi":
                inside = True
            if inside and name not in ("multi", "exec", "discard"):
                self.queued[name] += 1
                self.detail[f"{name} (queued)"] += 1
            else:
                self.top[name] += 1
                function = _name(args[1:]) if name.startswith("fcall") else ""
                self.detail[f"{name} {function}".strip()] += 1
            if name in ("exec", "discard"):
                inside = False

    def install(self) -> None:
        """Wraps send_command, pack_commands and send_packed_command of redis-py's sync and
        asyncio connections (every command goes through one of the first two, every
        write through the third)."""
        import redis.asyncio.connection
        import redis.connection

        def command(args: tuple[Any, ...]) -> tuple[Any, ...]:
            self.names([args])
            return args

        def pipeline(args: tuple[Any, ...]) -> tuple[Any, ...]:
            commands = [tuple(c) for c in args[0]]
            self.names(commands)
            return (commands, *args[1:])

        def write(args: tuple[Any, ...]) -> tuple[Any, ...]:
            self.trips += self.on
            return args

        for cls in (
            redis.connection.AbstractConnection,
            redis.asyncio.connection.AbstractConnection,
        ):  # (an asyncio method's coroutine is returned as it is, for its caller to await)
            _wrap(cls, "send_command", command)
            _wrap(cls, "pack_commands", pipeline)
            _wrap(cls, "send_packed_command", write)


def _wrap(cls: type, name: str, before: Callable[[tuple[Any, ...]], tuple[Any, ...]]) -> None:
    original: Any = getattr(cls, name)

    def wrapped(conn: Any, *args: Any, **kwargs: Any) -> Any:
        return original(conn, *before(args), **kwargs)

    setattr(cls, name, wrapped)


@dataclass
class Meter:
    """INFO commandstats over a flow's timed turns (CONFIG RESETSTAT at start()), and
    the commands the client sent meanwhile; read at stop(), before any cleanup."""

    stats: Any  # a redis.Redis of its own (its commands are not counted by the Wire)
    wire: Wire
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    top: dict[str, int] = field(default_factory=dict)
    queued: dict[str, int] = field(default_factory=dict)
    detail: dict[str, int] = field(default_factory=dict)

    def start(self) -> None:
        self.stats.config_resetstat()
        for counter in (self.wire.top, self.wire.queued, self.wire.detail):
            counter.clear()

    def stop(self) -> None:
        found = self.stats.info("commandstats")
        self.calls = {k.removeprefix("cmdstat_"): v for k, v in found.items()}
        self.top, self.queued = dict(self.wire.top), dict(self.wire.queued)
        self.detail = dict(self.wire.detail)


# --- the flows: one turn each, the constructors in one small function per adapter -------


def openai_session(url: str, session_id: str) -> Any:
    from memevict.integrations.openai_agents import MemevictSession

    return MemevictSession(session_id, url=url, max_tokens=MAX_TOKENS)


def redis_session(url: str, session_id: str) -> Any:
    from agents.extensions.memory.redis_session import RedisSession

    return RedisSession.from_url(session_id, url=url)


def langchain_middleware(url: str, namespace: str) -> Any:
    # namespace=: one namespace whatever the thread (base and HEAD alike), no thread id read
    from memevict.integrations.langchain import MemevictMiddleware

    return MemevictMiddleware(url=url, max_tokens=MAX_TOKENS, namespace=namespace)


def pydantic_history(url: str, session_id: str) -> Any:
    from memevict.integrations.pydantic_ai import SyncMemevictHistory

    return SyncMemevictHistory(session_id=session_id, url=url, max_tokens=MAX_TOKENS)


@dataclass
class Timed:
    """One flow's timed turns: wall µs, round trips and what was sent, per turn."""

    us: list[float] = field(default_factory=list)
    trips: list[int] = field(default_factory=list)
    sent: list[int] = field(default_factory=list)


def _user_item(text: str) -> dict[str, Any]:
    return {"content": text, "role": "user"}  # as Runner.run passes a string input


def _assistant_item(text: str, i: int) -> dict[str, Any]:
    return {  # a ResponseOutputMessage as Runner.run saves it
        "id": f"msg_{i:06d}{secrets.token_hex(8)}",
        "content": [{"annotations": [], "text": text, "type": "output_text"}],
        "role": "assistant",
        "status": "completed",
        "type": "message",
    }


async def _openai_turns(
    session: Any, texts: Callable[[int], tuple[str, str]], turns: range, runner: bool,
    timed: Timed | None, wire: Wire,
) -> None:  # fmt: skip
    for i in turns:
        question, answer = texts(i)
        user, assistant = _user_item(question), _assistant_item(answer, i)
        wire.trips, wire.on = 0, timed is not None
        start = time.perf_counter()
        items = await session.get_items()
        if runner:
            await session.add_items([user])
            await session.add_items([assistant])
        else:
            await session.add_items([user, assistant])
        elapsed = time.perf_counter() - start
        wire.on = False
        if timed is not None:
            timed.us.append(elapsed * 1e6)
            timed.trips.append(wire.trips)
            timed.sent.append(len(items))


def run_openai(
    make: Callable[[], Any], texts: Callable[[int], tuple[str, str]], warm: int, turns: int,
    runner: bool, meter: Meter, wire: Wire,
) -> Timed:  # fmt: skip
    timed = Timed()

    async def run() -> None:
        session = make()
        await _openai_turns(session, texts, range(warm), runner, None, wire)
        meter.start()
        await _openai_turns(session, texts, range(warm, warm + turns), runner, timed, wire)
        meter.stop()
        await session.clear_session()
        await session.close()

    asyncio.run(run())
    return timed


def run_langchain(
    url: str, session_id: str, texts: Callable[[int], tuple[str, str]], warm: int,
    turns: int, meter: Meter, wire: Wire,
) -> Timed:  # fmt: skip
    from langchain.agents.middleware import ModelRequest, ModelResponse
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

    namespace = f"langchain:{session_id}"
    middleware = langchain_middleware(url, namespace)
    model = GenericFakeChatModel(messages=iter(()))
    history: list[AnyMessage] = []  # the graph state's messages
    timed = Timed()
    for i in range(warm + turns):
        if i == warm:
            meter.start()
        question, answer = texts(i)
        human = HumanMessage(question, id=secrets.token_hex(16))
        ai = AIMessage(answer, id=f"lc_run--{secrets.token_hex(16)}")
        messages = [*history, human]
        state: Any = {"messages": messages}  # (an AgentState)
        request = ModelRequest(model=model, messages=messages, state=state)
        sent: list[int] = []

        def handler(request: Any, ai: AIMessage = ai, sent: list[int] = sent) -> Any:
            sent.append(len(request.messages))
            return ModelResponse(result=[ai])

        wire.trips, wire.on = 0, i >= warm
        start = time.perf_counter()
        middleware.wrap_model_call(request, handler)
        elapsed = time.perf_counter() - start
        wire.on = False
        history += [human, ai]
        if i >= warm:
            timed.us.append(elapsed * 1e6)
            timed.trips.append(wire.trips)
            timed.sent.append(sent[0])
    meter.stop()
    middleware.conversation(namespace).store.drop()
    middleware.close()
    return timed


def run_pydantic_ai(
    url: str, session_id: str, texts: Callable[[int], tuple[str, str]], warm: int,
    turns: int, meter: Meter, wire: Wire,
) -> Timed:  # fmt: skip
    from pydantic_ai import messages as pai

    # What an Agent run does to message_history at its start (merging consecutive requests).
    repair = getattr(pai, "repair_messages", None)
    history = pydantic_history(url, session_id)
    previous: list[Any] = []  # the last run's all_messages()
    timed = Timed()
    for i in range(warm + turns):
        if i == warm:
            meter.start()
        question, answer = texts(i)
        cleaned = previous if repair is None else repair(previous, repair_last_response=False)
        messages = [*cleaned, pai.ModelRequest(parts=[pai.UserPromptPart(question)])]
        wire.trips, wire.on = 0, i >= warm
        start = time.perf_counter()
        output = history(messages)
        elapsed = time.perf_counter() - start
        wire.on = False
        response = pai.ModelResponse(parts=[pai.TextPart(answer)], model_name="bench-model")
        previous = [*output, response]
        if i >= warm:
            timed.us.append(elapsed * 1e6)
            timed.trips.append(wire.trips)
            timed.sent.append(len(output))
    meter.stop()
    history.store.drop()
    history.close()
    return timed


def one_side(url: str, side: str, round_no: int, turns: int, warm: int) -> dict[str, Any]:
    """Run in a child process (the side's memevict first on sys.path): every flow of
    memevict and RedisSession's, on sessions of their own; the measures per flow."""
    import redis

    import memevict

    wire = Wire()
    wire.install()
    meter = Meter(redis.Redis.from_url(url), wire)
    tag = f"{side}-{round_no}-{secrets.token_hex(3)}"

    def openai(peer: str, runner: bool) -> Callable[[Callable[[int], Any]], Timed]:
        def run(texts: Callable[[int], Any]) -> Timed:
            sid = f"turn-{tag}-{peer}-{int(runner)}"
            make = openai_session if peer == MEMEVICT else redis_session
            return run_openai(lambda: make(url, sid), texts, warm, turns, runner, meter, wire)

        return run

    runs: dict[tuple[str, str], Callable[[Callable[[int], Any]], Timed]] = {
        (MEMEVICT, "openai"): openai(MEMEVICT, False),
        (MEMEVICT, "openai-runner"): openai(MEMEVICT, True),
        (MEMEVICT, "langchain"): lambda texts: run_langchain(
            url, f"turn-{tag}", texts, warm, turns, meter, wire
        ),
        (MEMEVICT, "pydantic-ai"): lambda texts: run_pydantic_ai(
            url, f"turn-{tag}", texts, warm, turns, meter, wire
        ),
        (REDIS_SESSION, "openai"): openai(REDIS_SESSION, False),
        (REDIS_SESSION, "openai-runner"): openai(REDIS_SESSION, True),
    }
    order = list(runs)
    shift = round_no % len(order)
    out: dict[str, Any] = {"memevict": memevict.__file__, "flows": {}}
    for peer, flow in order[shift:] + order[:shift]:
        timed = runs[peer, flow](exchanges(round_no, flow))
        calls, top, queued = meter.calls, meter.top, meter.queued
        out["flows"][f"{peer} {flow}"] = {
            "us": statistics.median(timed.us),
            "server_us": sum(calls[n]["usec"] for n in top if n in calls) / turns,
            "cmds": sum(calls[n]["calls"] for n in {*top, *queued} if n in calls) / turns,
            "client_cmds": (sum(top.values()) + sum(queued.values())) / turns,
            "trips": statistics.median(timed.trips),
            "trips_mean": statistics.fmean(timed.trips),
            "sent": statistics.median(timed.sent),
            "commands": meter.detail,
        }
    return out


# --- the parent: rounds, the table --------------------------------------------------------
# (Only the parent imports benchmarks/_harness.py, inside its functions: a child process
# imports its side's memevict, which may be older than the harness.)


def _median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _paired(a: Sequence[float], b: Sequence[float]) -> float:
    """b / a paired by round."""
    from _harness import paired

    return paired(b, a)


def _trips(median: float, mean: float) -> str:
    text = f"{median:g}"
    return text if abs(mean - median) < 0.005 else f"{text} ({mean:.2f})"


def table(results: dict[str, list[dict[str, Any]]], base: str) -> tuple[str, dict[str, Any]]:
    """The table (text) and its numbers, from each side's child results by round."""
    rounds = len(results["HEAD"])
    rows: list[str] = []
    summary: dict[str, Any] = {"base": base, "rounds": rounds, "flows": {}}

    def series(side: str, key: str, what: str) -> list[float]:
        return [float(r["flows"][key][what]) for r in results[side]]

    head = (
        f"{'adapter':14s} {'side':12s} {'µs/turn':>9s} {'server µs':>9s} {'cmds/turn':>9s}"
        f" {'trips/turn':>10s} {'sent':>5s}   HEAD/base µs  server µs"
    )
    rows += [head, "-" * len(head)]
    for flow in FLOWS:
        key = f"{MEMEVICT} {flow}"
        entry: dict[str, Any] = {}
        for side in SIDES:
            us, server = series(side, key, "us"), series(side, key, "server_us")
            cmds, trips = series(side, key, "cmds"), series(side, key, "trips")
            mean, sent = series(side, key, "trips_mean"), series(side, key, "sent")
            entry[side] = {
                "us": _median(us),
                "server_us": _median(server),
                "cmds": _median(cmds),
                "trips": _median(trips),
                "trips_mean": statistics.fmean(mean),
                "sent": _median(sent),
            }
            ratio = ""
            if side == "HEAD":
                entry["ratio_us"] = _paired(series("base", key, "us"), us)
                entry["ratio_server_us"] = _paired(series("base", key, "server_us"), server)
                ratio = f"   {entry['ratio_us']:12.3f}  {entry['ratio_server_us']:9.3f}"
            e = entry[side]
            rows.append(
                f"{flow:14s} {side:12s} {e['us']:9.0f} {e['server_us']:9.0f} {e['cmds']:9.2f}"
                f" {_trips(e['trips'], e['trips_mean']):>10s} {e['sent']:5.0f}{ratio}"
            )
        if flow in PEER_FLOWS:
            peer = f"{REDIS_SESSION} {flow}"
            both = [r["flows"][peer] for side in SIDES for r in results[side]]
            e = {
                "us": _median([x["us"] for x in both]),
                "server_us": _median([x["server_us"] for x in both]),
                "cmds": _median([x["cmds"] for x in both]),
                "trips": _median([x["trips"] for x in both]),
                "trips_mean": statistics.fmean(x["trips_mean"] for x in both),
                "sent": _median([x["sent"] for x in both]),
            }
            entry[REDIS_SESSION] = e
            for side in SIDES:  # turns/s of memevict ÷ RedisSession's, in the same process
                entry[f"{side}_vs_{REDIS_SESSION}"] = _paired(
                    series(side, key, "us"), series(side, peer, "us")
                )
            rows.append(
                f"{flow:14s} {REDIS_SESSION:12s} {e['us']:9.0f} {e['server_us']:9.0f}"
                f" {e['cmds']:9.2f} {_trips(e['trips'], e['trips_mean']):>10s} {e['sent']:5.0f}"
            )
        summary["flows"][flow] = entry
    rows.append("")
    for flow in PEER_FLOWS:
        e = summary["flows"][flow]
        rows.append(
            f"memevict / RedisSession turns/s ({flow}, paired in each process): "
            f"base {e[f'base_vs_{REDIS_SESSION}']:.3f}, HEAD {e[f'HEAD_vs_{REDIS_SESSION}']:.3f}"
        )
    return "\n".join(rows), summary


def _differences(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Flows whose commands counted on the server differ from the client's count (a
    command the client sends also called inside a script or a transaction)."""
    found = set()
    for side, runs in results.items():
        for r in runs:
            for key, f in r["flows"].items():
                server, client = f["cmds"], f["client_cmds"]
                if abs(server - client) > 1e-9:
                    found.add(f"{side} {key}: server {server:.2f}, client {client:.2f}")
    return sorted(found)


def _dirty() -> bool:
    done = subprocess.run(
        ["git", "status", "--porcelain", "--", "loader", "lua"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return bool(done.stdout.strip())


def run_rounds(
    opts: argparse.Namespace, url: str, loaders: dict[str, Path], load: list[float]
) -> dict[str, list[dict[str, Any]]]:
    """The rounds, a child process per side (the order alternating): each side's results
    by round; the load average after each child, appended to ``load``."""
    from _harness import interleave

    def child(side: str, r: int) -> dict[str, Any]:
        env = dict(os.environ, PYTHONPATH=str(loaders[side]))
        args = ["--side", side, "--round", str(r), "--turns", str(opts.turns)]
        done = subprocess.run(
            [sys.executable, __file__, url, *args, "--warm", str(opts.warm)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        got: dict[str, Any] = json.loads(done.stdout)
        where = Path(got["memevict"]).resolve()
        assert where.is_relative_to(loaders[side].resolve()), (side, where)
        load.append(os.getloadavg()[0])
        return got

    return interleave(opts.rounds, SIDES, child)


def main(argv: Sequence[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if "--side" in args:  # a child process: no harness (see above)
        child = argparse.ArgumentParser()
        child.add_argument("url")
        child.add_argument("--side")
        child.add_argument("--round", type=int)
        child.add_argument("--turns", type=int)
        child.add_argument("--warm", type=int)
        c = child.parse_args(args)
        print(json.dumps(one_side(c.url, c.side, c.round, c.turns, c.warm)))
        return
    from _harness import Run, checkout, parser, server

    cli = parser(__doc__)
    cli.add_argument("url", nargs="?", help="the server (default: an embedded Valkey)")
    cli.add_argument("--base", default=BASE, help=f"side base's git revision ({BASE})")
    cli.add_argument("--turns", type=int, default=200, help="timed turns per flow")
    cli.add_argument("--rounds", type=int, default=20)
    cli.add_argument("--warm", type=int, default=60, help="untimed turns first")
    opts = cli.parse_args(args)
    run = Run(opts)
    tree = checkout(opts.base, "loader", "lua")  # (loader/memevict/lua links to ../../lua)
    loaders = {"base": tree / "loader", "HEAD": ROOT / "loader"}
    load = [os.getloadavg()[0]]
    try:
        with server(opts.url) as found:
            run.on(found)
            started = time.monotonic()
            results = run_rounds(opts, found.url, loaders, load)
            seconds = time.monotonic() - started
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    version = f"{run.environment['server']} {run.environment['server_version']}"
    text, summary = table(results, opts.base)
    dirty = " (loader/ or lua/ modified)" if _dirty() else ""
    print(
        f"server {version}: one agent turn per adapter at max_tokens={MAX_TOKENS}, "
        f"{opts.warm} turns first; median of {opts.rounds} rounds x {opts.turns} turns; "
        f"base = {opts.base}, HEAD = the working tree{dirty}; {seconds:.0f} s, "
        f"load average (1 min) {min(load):.2f}-{max(load):.2f}"
    )
    print(text)
    for line in _differences(results):
        print(f"note: commands counted differ, {line}")

    def per_turn(counts: dict[str, int]) -> str:
        return ", ".join(f"{name} {n / opts.turns:g}" for name, n in sorted(counts.items()))

    commands = {  # of the last round
        side: {key: per_turn(f["commands"]) for key, f in results[side][-1]["flows"].items()}
        for side in SIDES
    }
    print("commands sent per turn (the last round):")
    for key in sorted(commands["HEAD"]):
        base, head = commands["base"][key], commands["HEAD"][key]
        both = f"both: {head}" if base == head else f"base: {base}; HEAD: {head}"
        print(f"  {key:28s} {both}")
    flows = summary["flows"]
    us = ", ".join(f"{flow} {flows[flow]['HEAD']['us']:,.0f}" for flow in FLOWS)
    run.row(
        "A turn through each adapter",
        f"µs a turn: {us}; OpenAI ÷ RedisSession turns/s "
        f"{flows['openai'][f'HEAD_vs_{REDIS_SESSION}']:.3f}",
    )
    summary.update(server=version, load=load, turns=opts.turns, warm=opts.warm)
    run.finish({**summary, "commands": commands})


if __name__ == "__main__":
    main()
