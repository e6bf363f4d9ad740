"""A chat model as the labeler of an async adapter (issue 38, item 13), through the real
OpenAI client against a chat model served over HTTP on loopback (``ModelServer``: it
answers as tests/test_labelers.py's scripted ``Model`` does, after a latency, or fails with
503 while it is down).

- The documented sync glue (``OpenAI().chat.completions.create``) used to block the event
  loop for the model's whole latency in an async adapter: a ticker task saw a gap of 0.5 s.
  Awaited, it now runs in a worker thread (as any ``CachedLabeler(..., blocking=True)``
  does); the async glue (``AsyncOpenAI``) is awaited.
- A model that is down used to be asked again for every message (31 failing calls for 30
  items); after a failed call the rules rate for a while (``backoff_s``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest
import redis.asyncio

from memevict.errors import BadArgument
from memevict.importance import Message, aimportance_of, rules
from memevict.integrations.openai_agents import MemevictSession
from memevict.labelers import (
    CachedLabeler,
    ChatMessages,
    aimportances_of,
    chat_labeler,
    importances_of,
)
from tests.servers import Server
from tests.test_labelers import FACT, HELLO, Model

LATENCY_S = 0.5
WARM_UP = Message("warming up", role="user")


class _Listening(ThreadingHTTPServer):
    request_queue_size = 128  # (the default 5 refuses a burst of concurrent requests)


class ModelServer:
    """OpenAI's ``POST /v1/chat/completions`` on a free loopback port, served from a thread:
    each request is answered by ``model`` after ``latency_s``, or with 503 while ``down``.
    ``requests`` counts the requests, answered or not."""

    def __init__(self, model: Model, latency_s: float = 0.0) -> None:
        self.model, self.latency_s, self.down, self.requests = model, latency_s, False, 0
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                served.requests += 1
                time.sleep(served.latency_s)
                if served.down:
                    self._send(503, {"error": {"message": "the model is down"}})
                    return
                reply = served.model(body["messages"])
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{served.requests}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": reply},
                                "finish_reason": "stop",
                            }
                        ],
                    },
                )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # (quiet)

        self.http = _Listening(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}/v1"

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    served = ModelServer(Model(), latency_s=LATENCY_S)
    yield served
    served.close()


def sync_glue(url: str) -> Callable[[ChatMessages], str | None]:
    """The documented glue (labelers.py, docs/simulate.md), on the served model."""
    client = openai.OpenAI(api_key="test", base_url=url, max_retries=0)

    def complete(messages: ChatMessages) -> str | None:
        reply = client.chat.completions.create(model="rater", messages=messages)  # type: ignore[arg-type]
        return reply.choices[0].message.content

    return complete


def async_glue(url: str) -> Callable[[ChatMessages], Awaitable[str | None]]:
    """The async glue (docs/simulate.md), on the served model."""
    client = openai.AsyncOpenAI(api_key="test", base_url=url, max_retries=0)

    async def complete(messages: ChatMessages) -> str | None:
        reply = await client.chat.completions.create(model="rater", messages=messages)  # type: ignore[arg-type]
        return reply.choices[0].message.content

    return complete


async def longest_stall(work: Awaitable[Any]) -> tuple[float, float]:
    """The longest gap between two ticks of a 10 ms ticker while ``work`` runs, and how long
    ``work`` took."""
    longest = 0.0
    done = asyncio.Event()

    async def tick() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            longest, last = max(longest, now - last), now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.05)  # (the ticker runs)
    start = time.perf_counter()
    try:
        await work
    finally:
        took = time.perf_counter() - start
        done.set()
        await ticker
    return longest, took


@pytest.mark.parametrize("glue", [sync_glue, async_glue])
def test_an_async_adapter_goes_on_while_the_model_rates(
    server: Server, model_server: ModelServer, glue: Callable[[str], Any]
) -> None:
    labeler = chat_labeler(glue(model_server.url))

    async def run() -> tuple[float, float, list[float]]:
        client = redis.asyncio.Redis.from_url(server.url)
        session = MemevictSession("rated-async", client=client, labeler=labeler)
        try:
            await session.clear_session()
            await aimportance_of(labeler, WARM_UP)  # (the client's first call imports more)
            items = [{"role": "user", "content": FACT.text}, {"role": "user", "content": "hi!"}]
            stall, took = await longest_stall(session.add_items(items))
            stored = [await session.store.get(e.id) for e in session._added]
            return stall, took, [m.importance for m in stored if m is not None]
        finally:
            await session.clear_session()
            await client.aclose()

    stall, took, importances = asyncio.run(run())
    assert importances == [7.0, 2.0] and model_server.requests == 2  # rated by the model
    assert took >= LATENCY_S
    assert stall < LATENCY_S / 2, f"the event loop stalled {stall:.3f} s"


def test_awaiting_a_sync_chat_labeler_leaves_the_event_loop_free(
    model_server: ModelServer,
) -> None:
    labeler = chat_labeler(sync_glue(model_server.url), batch=False)

    async def run() -> tuple[tuple[float, float], tuple[float, float]]:
        await aimportance_of(labeler, WARM_UP)
        one = await longest_stall(aimportance_of(labeler, FACT))
        many = await longest_stall(aimportances_of(labeler, [FACT, HELLO]))
        return one, many

    (stall_one, took_one), (stall_many, took_many) = asyncio.run(run())
    assert model_server.requests == 3 and labeler.calls == 3
    assert min(took_one, took_many) >= LATENCY_S
    assert max(stall_one, stall_many) < LATENCY_S / 2


MESSAGES = [Message(f"note {i}: the build on host {i} passed", role="user") for i in range(30)]


def test_a_model_that_is_down_is_not_asked_for_every_message(model_server: ModelServer) -> None:
    """30 messages while the model is down: one failed request, then the rules rate."""
    model_server.latency_s, model_server.down = 0.0, True
    got = importances_of(chat_labeler(sync_glue(model_server.url)), MESSAGES)
    assert got == [rules(m) for m in MESSAGES]
    assert model_server.requests == 1

    async def run() -> list[float]:
        return await aimportances_of(chat_labeler(async_glue(model_server.url)), MESSAGES)

    assert asyncio.run(run()) == [rules(m) for m in MESSAGES]
    assert model_server.requests == 2


def pauses(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The pauses the failed calls logged ("10 s", ...), in order."""
    return re.findall(r"not asked for (\S+ s)", caplog.text)


def test_the_pause_doubles_while_the_model_fails_and_ends_when_it_answers(
    model_server: ModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    model_server.latency_s, model_server.down = 0.0, True
    labeler = chat_labeler(sync_glue(model_server.url), backoff_s=0.5, batch=False)
    rated = iter(MESSAGES)
    with caplog.at_level(logging.WARNING, logger="memevict.labelers"):
        assert importances_of(labeler, [next(rated), next(rated)]) == [
            rules(m) for m in MESSAGES[:2]
        ]
        assert model_server.requests == 1 and pauses(caplog) == ["0.5 s"]
        time.sleep(0.6)  # the pause is over: one call tries the model again, and fails
        importances_of(labeler, [next(rated), next(rated)])
        assert model_server.requests == 2 and pauses(caplog) == ["0.5 s", "1 s"]
        time.sleep(0.6)  # within the doubled pause: no call
        importances_of(labeler, [next(rated)])
        assert model_server.requests == 2
        time.sleep(0.5)
        model_server.down = False  # the model is back: its first answer ends the backoff
        assert importances_of(labeler, [FACT, HELLO]) == [7.0, 2.0]
        assert model_server.requests == 4 and len(pauses(caplog)) == 2
    # a reply without a number is no failure: the model is asked for every message
    model_server.model.reply = "important!"
    fine = chat_labeler(sync_glue(model_server.url), backoff_s=0.5, batch=False)
    assert importances_of(fine, MESSAGES[:3]) == [rules(m) for m in MESSAGES[:3]]
    assert model_server.requests == 7


def test_calls_failing_together_are_one_failure(
    model_server: ModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    """20 sessions' calls in flight when the model goes down: each fails, and the pause
    is not doubled 20 times (to the 5 minutes of MAX_BACKOFF_S) for one outage."""
    model_server.latency_s, model_server.down = 0.2, True
    labeler = chat_labeler(async_glue(model_server.url))

    async def run() -> list[list[float]]:
        turns = [aimportances_of(labeler, [m]) for m in MESSAGES[:20]]
        return await asyncio.gather(*turns)

    with caplog.at_level(logging.WARNING, logger="memevict.labelers"):
        assert asyncio.run(run()) == [[rules(m)] for m in MESSAGES[:20]]
    assert model_server.requests == 20 and pauses(caplog) == ["10 s"] * 20
    assert importances_of(chat_labeler(sync_glue(model_server.url), backoff_s=0), MESSAGES) == [
        rules(m) for m in MESSAGES
    ]
    assert model_server.requests == 20 + 31  # (backoff_s=0: asked for every message)


@pytest.mark.parametrize("wrong", [-1.0, float("nan"), float("inf"), "10", True])
def test_backoff_s_is_a_finite_number_of_seconds(wrong: object) -> None:
    with pytest.raises(BadArgument, match="backoff_s"):
        chat_labeler(lambda messages: "7", backoff_s=wrong)  # type: ignore[arg-type]


def test_a_blocking_labeler_of_your_own_runs_in_a_worker_thread_when_awaited() -> None:
    def slow(message: Message) -> float:
        time.sleep(0.3)  # (a labeler waiting on the network)
        return 4.0

    def slow_many(messages: list[Message]) -> list[float]:
        time.sleep(0.3)
        return [4.0] * len(messages)

    async def run(labeler: CachedLabeler) -> list[float]:
        one, _ = await longest_stall(aimportance_of(labeler, FACT))
        many, _ = await longest_stall(aimportances_of(labeler, [HELLO, WARM_UP]))
        return [one, many]

    assert max(asyncio.run(run(CachedLabeler(slow, batch=slow_many, blocking=True)))) < 0.15
    assert min(asyncio.run(run(CachedLabeler(slow, batch=slow_many)))) >= 0.3  # in the loop
    labeler = CachedLabeler(slow, blocking=True)
    assert importances_of(labeler, [FACT]) == [4.0] and labeler.calls == 1  # sync: as ever
