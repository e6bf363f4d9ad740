"""memevict.labelers: a chat model as the labeler, through a scripted model (no network):
what it is asked, how its replies are read, each message rated once, a list rated in one
request, what happens when the model fails; and the same through an adapter and
``memevict simulate``'s labelling on a real server."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest
import redis.asyncio

from memevict.errors import BadArgument, BadImportance
from memevict.importance import CATEGORIES, Message, importance_of
from memevict.integrations.openai_agents import MemevictSession
from memevict.labelers import (
    RATING_PROMPT,
    CachedLabeler,
    ChatMessages,
    aimportances_of,
    chat_labeler,
    importances_of,
)
from memevict.simulate.labels import alabel_transcript, label_transcript
from memevict.simulate.transcript import MemoryTurn, Transcript
from tests.servers import Server

FACT = Message("My sister's wedding moved to June 12 in Porto.", role="user")
HELLO = Message("hi!", role="user")
ERROR = Message("Traceback: KeyError 'id'", role="tool")


class Model:
    """A scripted chat model: rates a message by what it says (a date 7, an error 8, else
    2), and answers a numbered list one "<i>: <rating>" line each; records every request."""

    def __init__(self, reply: str | None = None, skip: int | None = None) -> None:
        self.requests: list[ChatMessages] = []
        self.reply, self.skip = reply, skip

    def __call__(self, messages: ChatMessages) -> str:
        self.requests.append(messages)
        if self.reply is not None:
            return self.reply
        asked = messages[-1]["content"]
        numbered = re.findall(r"^\[(\d+)\] (.*)$", asked, re.M)
        if not numbered:
            return f"{self.rate(asked)}"
        return "\n".join(f"{i}: {self.rate(text)}" for i, text in numbered if int(i) != self.skip)

    @staticmethod
    def rate(text: str) -> int:
        return 7 if "June" in text else 8 if "Traceback" in text else 2


def test_the_model_is_asked_once_per_message_on_memevicts_scale() -> None:
    model = Model()
    labeler = chat_labeler(model)
    assert importance_of(labeler, FACT) == 7.0 and importance_of(labeler, HELLO) == 2.0
    assert importance_of(labeler, FACT) == 7.0  # cached: no request
    assert len(model.requests) == 2 and labeler.calls == 2
    system, user = model.requests[0]
    assert system == {"role": "system", "content": RATING_PROMPT}
    assert user == {"role": "user", "content": f"(user) {FACT.text}"}
    for importance in CATEGORIES.values():  # the scale names every category's importance
        assert f"- {importance:g}: " in RATING_PROMPT
    # the same text from another role is another message
    assert importance_of(labeler, Message(FACT.text, role="assistant")) == 7.0
    assert len(model.requests) == 3


def test_a_list_is_rated_in_one_request_and_a_missing_line_alone() -> None:
    model = Model(skip=2)
    labeler = chat_labeler(model)
    assert importance_of(labeler, HELLO) == 2.0  # cached before the list
    got = importances_of(labeler, [FACT, HELLO, ERROR, Message("ok", role="user"), FACT])
    assert got == [7.0, 2.0, 8.0, 2.0, 7.0]
    # one request for the three new messages (FACT once); the model left out line 2
    # (ERROR), which was asked alone
    batch = model.requests[1][-1]["content"]
    assert batch.startswith(f"[1] (user) {FACT.text}\n\n[2] (tool) {ERROR.text}\n\n[3] ")
    assert "one line per message" in model.requests[1][0]["content"]
    assert model.requests[2][-1]["content"] == f"(tool) {ERROR.text}"
    assert len(model.requests) == 3
    assert importances_of(labeler, [FACT, ERROR]) == [7.0, 8.0] and len(model.requests) == 3
    single = chat_labeler(Model(), batch=False)
    assert importances_of(single, [FACT, HELLO]) == [7.0, 2.0] and single.batch is None


@pytest.mark.parametrize(
    ("reply", "expected"),
    [("Rating: 6.5", 6.5), ("42", 10.0), ("0", 1.0), ("-3", 1.0), ("9 (an order)", 9.0)],
)
def test_a_reply_is_read_for_its_first_number_clamped_to_the_scale(
    reply: str, expected: float
) -> None:
    assert importance_of(chat_labeler(Model(reply)), FACT) == expected


def test_a_model_that_fails_or_answers_no_number_leaves_it_to_the_rules(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rules_said = importance_of(chat_labeler(lambda _: "7", fallback=lambda m: 4.0), FACT)
    assert rules_said == 7.0
    with caplog.at_level(logging.WARNING, logger="memevict.labelers"):
        assert importance_of(chat_labeler(Model("important!"), fallback=lambda m: 4.0), FACT) == 4

        def down(messages: ChatMessages) -> str:
            raise ConnectionError("the model is down")

        labeler = chat_labeler(down, fallback=lambda m: 4.5)
        assert importances_of(labeler, [FACT, HELLO]) == [4.5, 4.5]
    assert "no rating from the model" in caplog.text and "the model call failed" in caplog.text


def test_an_async_model_is_awaited_and_cached() -> None:
    model = Model()

    async def complete(messages: ChatMessages) -> str:
        await asyncio.sleep(0)
        return model(messages)

    labeler = chat_labeler(complete)
    with pytest.raises(BadArgument, match="awaitable"):
        importance_of(labeler, FACT)  # (an async labeler needs aimportance_of)
    got = asyncio.run(aimportances_of(labeler, [FACT, HELLO, FACT]))
    assert got == [7.0, 2.0, 7.0] and len(model.requests) == 1
    with pytest.raises(BadArgument, match="async def"):
        importance_of(chat_labeler(lambda m: complete(m)), HELLO)  # sync def, awaitable


def test_a_cached_labeler_keeps_the_newest_and_checks_every_answer() -> None:
    seen: list[str] = []

    def count(message: Message) -> float:
        seen.append(message.text)
        return float(len(message.text))

    labeler = CachedLabeler(count, size=2)
    for text in ("a", "bb", "a", "ccc", "bb", "a"):
        importance_of(labeler, Message(text))
    # "a" was used before "ccc" came, so "bb" went; then "a" went for "bb"
    assert seen == ["a", "bb", "ccc", "bb", "a"]
    with pytest.raises(BadImportance):
        importance_of(CachedLabeler(lambda m: -1.0), FACT)
    with pytest.raises(BadArgument, match="list of 2"):
        importances_of(CachedLabeler(count, batch=lambda ms: [1.0]), [FACT, HELLO])
    with pytest.raises(BadImportance):
        importances_of(CachedLabeler(count, batch=lambda ms: [1.0, float("nan")]), [FACT, HELLO])
    for size in (0, 1.5, True):
        with pytest.raises(BadArgument, match="size"):
            CachedLabeler(count, size=size)  # type: ignore[arg-type]


def test_simulate_labels_a_transcript_in_one_request() -> None:
    turns = [MemoryTurn(f"t{i}", None, i, text=m.text, role=m.role) for i, m in enumerate(
        [FACT, HELLO, ERROR, HELLO]
    )]  # fmt: skip
    model = Model()
    labelled = label_transcript(Transcript(tuple(turns), "x"), chat_labeler(model))
    assert [e.importance for e in labelled.events] == [7.0, 2.0, 8.0, 2.0]  # type: ignore[union-attr]
    assert len(model.requests) == 1

    async def complete(messages: ChatMessages) -> str:
        return model(messages)

    labelled = asyncio.run(alabel_transcript(Transcript(tuple(turns), "x"), chat_labeler(complete)))
    assert [e.importance for e in labelled.events] == [7.0, 2.0, 8.0, 2.0]  # type: ignore[union-attr]
    assert len(model.requests) == 2
    # (a sync entry point runs an async labeler to completion)
    again = label_transcript(Transcript(tuple(turns), "x"), chat_labeler(complete))
    assert again.events == labelled.events and len(model.requests) == 3


def test_an_adapter_rates_each_new_message_once_through_the_model(server: Server) -> None:
    model = Model()

    async def complete(messages: ChatMessages) -> str:
        return model(messages)

    async def run() -> tuple[list[float], int]:
        client = redis.asyncio.Redis.from_url(server.url)
        session = MemevictSession("rated", client=client, labeler=chat_labeler(complete))
        try:
            await session.clear_session()
            await session.add_items([{"role": "user", "content": FACT.text}])
            await session.add_items(
                [{"role": "assistant", "content": "Noted!"}, {"role": "user", "content": "hi!"}]
            )
            items = await session.get_items()
            stored = [await session.store.get(e.id) for e in session._added]
            assert [i["content"] for i in items] == [FACT.text, "Noted!", "hi!"]
            return [m.importance for m in stored if m is not None], len(model.requests)
        finally:
            await session.clear_session()
            await client.aclose()

    importances, requests = asyncio.run(run())
    assert importances == [7.0, 2.0, 2.0] and requests == 2  # one per add_items
