"""A model as the labeler, and rating each message once.

:func:`chat_labeler` makes a labeler of any chat-completion call. Give it ``complete``: a
function from a list of chat messages (``{"role": ..., "content": ...}``) to the text of the
model's reply, sync or async. That is a line of glue for any client::

    from openai import OpenAI

    client = OpenAI()

    def complete(messages):
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        return reply.choices[0].message.content

    labeler = chat_labeler(complete)
    session = MemevictSession("user-42", url="redis://localhost:6379", labeler=labeler)

The model is asked to rate the message on memevict's scale (:data:`RATING_PROMPT`: the
categories of :data:`memevict.importance.CATEGORIES`, 1 to 10). The first number of its
reply is the importance, clamped to [1, 10]. A reply without a number, or a call that
raises, is rated by ``fallback`` (the built-in rules) and logged to ``memevict.labelers``:
a model outage costs ranking quality, never a turn.

The labeler is a :class:`CachedLabeler`: each distinct message (text, role, kind and
tool status) is rated once, and kept in an LRU of ``size`` messages. A framework that
resends the whole history on every call costs no second request. :func:`importances_of`
and :func:`aimportances_of` rate a list of messages: with a cached labeler, those not
cached yet go in one request (a numbered list, answered one ``<n>: <rating>`` line per
message; a line missing is asked again alone). The adapters and ``memevict simulate``
rate through them.

:class:`CachedLabeler` wraps any labeler the same way, with an optional ``batch``
callable that rates a list of messages at once.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeAlias

from memevict.errors import BadArgument
from memevict.importance import (
    CATEGORIES,
    Labeler,
    Message,
    _checked,  # (the one check of an importance, shared with importance_of)
    aimportance_of,
    importance_of,
    rules,
)

__all__ = [
    "RATING_PROMPT",
    "BatchLabeler",
    "CachedLabeler",
    "ChatMessages",
    "aimportances_of",
    "chat_labeler",
    "importances_of",
]

log = logging.getLogger("memevict.labelers")

ChatMessages: TypeAlias = list[dict[str, str]]
Complete: TypeAlias = Callable[[ChatMessages], "str | Awaitable[str | None] | None"]

_SCALE = "\n".join(
    f"- {importance:g}: {what}"
    for importance, what in (
        (CATEGORIES["instruction"], "an instruction or setting meant to last, a credential"),
        (CATEGORIES["tool_error"], "a tool error or an alert"),
        (
            CATEGORIES["business"],
            "a concrete fact to recall later: a person's life event, plan, preference or "
            "relationship with a date, number or name; money, an order, a deadline",
        ),
        (CATEGORIES["conclusion"], "a conclusion, a decision, a personal statement or plan"),
        (CATEGORIES["context"], "general context, a question, talk about the other person"),
        (CATEGORIES["chitchat"], "a greeting, thanks, a reaction, small talk"),
    )
)
RATING_PROMPT = (
    "You rate how important a message of a conversation is to remember later, when the "
    "context window is full and something must be forgotten. Scale:\n"
    f"{_SCALE}\n"
    "Use any number from 1 to 10. Answer with the number only."
)
_BATCH_ASK = (
    "Rate each numbered message below. Answer one line per message, "
    "'<number>: <rating>', and nothing else."
)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_LINE = re.compile(r"^\s*\[?(\d+)\]?\s*[:.)-]\s*(-?\d+(?:\.\d+)?)", re.M)


class BatchLabeler(Protocol):
    """Rates a list of messages at once: their importances in order, or an awaitable."""

    def __call__(self, messages: list[Message], /) -> list[float] | Awaitable[list[float]]: ...


class CachedLabeler:
    """A labeler that rates each distinct message once: ``labeler`` rates one message,
    ``batch`` (optional) a list of them; answers are kept in an LRU of ``size`` messages.
    Either may be async. Every answer is checked as :func:`importance_of` checks one."""

    def __init__(
        self,
        labeler: Labeler,
        *,
        batch: BatchLabeler | None = None,
        size: int = 10_000,
    ) -> None:
        if not callable(labeler) or (batch is not None and not callable(batch)):
            raise BadArgument("CachedLabeler takes a labeler (and a batch labeler) to call")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise BadArgument(f"size must be a whole number >= 1, got {size!r}")
        self.labeler, self.batch, self.size = labeler, batch, size
        self._rated: OrderedDict[Message, float] = OrderedDict()
        self.calls = 0  # messages rated by a call of labeler or batch (not from the cache)

    def __call__(self, message: Message) -> float | Awaitable[float]:
        known = self._cached(message)
        if known is not None:
            return known
        if defined_async(self.labeler):  # (called only when awaited)
            return self._rated_async(message)
        found = self.labeler(message)
        if inspect.isawaitable(found):  # (a sync def returning an awaitable)
            return self._keep_awaited(message, found)
        return self._keep(message, _checked(found, self.labeler))

    async def _rated_async(self, message: Message) -> float:
        return await self._keep_awaited(message, self.labeler(message))

    async def _keep_awaited(self, message: Message, found: object) -> float:
        return self._keep(
            message, _checked(await found if inspect.isawaitable(found) else found, self.labeler)
        )

    def cached(self, message: Message) -> float | None:
        """The rating of ``message`` if it is cached (without rating it)."""
        return self._cached(message)

    def _cached(self, message: Message) -> float | None:
        found = self._rated.get(message)
        if found is not None:
            self._rated.move_to_end(message)
        return found

    def _keep(self, message: Message, importance: float) -> float:
        self.calls += 1
        self._rated[message] = importance
        self._rated.move_to_end(message)
        while len(self._rated) > self.size:
            self._rated.popitem(last=False)
        return importance

    def _kept(self, messages: Sequence[Message], found: object) -> None:
        if not isinstance(found, list) or len(found) != len(messages):
            raise BadArgument(
                f"batch labeler {self.batch!r} must return a list of {len(messages)} "
                f"importances, got {found!r:.80}"
            )
        for message, value in zip(messages, found, strict=True):
            self._keep(message, _checked(value, self.batch))


def importances_of(labeler: Labeler, messages: Sequence[Message]) -> list[float]:
    """The importances of ``messages`` by a synchronous ``labeler``: for a
    :class:`CachedLabeler` with a batch labeler, the messages not cached yet in one batch
    call; otherwise one call each. Each answer checked (BadImportance)."""
    if isinstance(labeler, CachedLabeler) and labeler.batch is not None:
        new = _uncached(labeler, messages)
        if new:
            found = labeler.batch(new)
            if inspect.isawaitable(found):
                _close(found)
                raise BadArgument(
                    f"batch labeler {labeler.batch!r} returned an awaitable; "
                    "call aimportances_of for it"
                )
            labeler._kept(new, found)
    return [importance_of(labeler, m) for m in messages]


async def aimportances_of(labeler: Labeler, messages: Sequence[Message]) -> list[float]:
    """:func:`importances_of` for any labeler, sync or async."""
    if isinstance(labeler, CachedLabeler) and labeler.batch is not None:
        new = _uncached(labeler, messages)
        if new:
            found = labeler.batch(new)
            labeler._kept(new, await found if inspect.isawaitable(found) else found)
    return [await aimportance_of(labeler, m) for m in messages]


def defined_async(function: object) -> bool:
    """Whether ``function`` is defined with ``async def`` (or its class's ``__call__``)."""
    call = inspect.getattr_static(type(function), "__call__", None)
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(call)


def _uncached(labeler: CachedLabeler, messages: Sequence[Message]) -> list[Message]:
    return list(dict.fromkeys(m for m in messages if labeler.cached(m) is None))


def _close(found: object) -> None:
    if inspect.iscoroutine(found):
        found.close()  # never awaited


def chat_labeler(
    complete: Complete,
    *,
    prompt: str = RATING_PROMPT,
    fallback: Labeler = rules,
    size: int = 10_000,
    batch: bool = True,
) -> CachedLabeler:
    """A labeler asking a chat model (``complete``: chat messages -> the reply's text, sync
    or async) to rate each message once, on :data:`RATING_PROMPT`'s scale; ``batch=False``
    sends one request per message even for a list. See the module's docstring."""
    if not callable(complete):
        raise BadArgument(f"complete must be callable, got {complete!r}")
    if defined_async(complete):

        async def arate(message: Message) -> float:
            found = _rating(await _aasked(complete, _one(prompt, message)))
            return found if found is not None else await _afallback(fallback, message)

        async def arate_many(messages: list[Message]) -> list[float]:
            found = _ratings(await _aasked(complete, _many(prompt, messages)), len(messages))
            pairs = zip(messages, found, strict=True)
            return [x if x is not None else await arate(m) for m, x in pairs]

        return CachedLabeler(arate, batch=arate_many if batch else None, size=size)

    def rate(message: Message) -> float:
        found = _rating(_asked(complete, _one(prompt, message)))
        return found if found is not None else _fallback(fallback, message)

    def rate_many(messages: list[Message]) -> list[float]:
        found = _ratings(_asked(complete, _many(prompt, messages)), len(messages))
        return [x if x is not None else rate(m) for m, x in zip(messages, found, strict=True)]

    return CachedLabeler(rate, batch=rate_many if batch else None, size=size)


def _one(prompt: str, message: Message) -> ChatMessages:
    return [{"role": "system", "content": prompt}, {"role": "user", "content": _shown(message)}]


def _many(prompt: str, messages: list[Message]) -> ChatMessages:
    listed = "\n\n".join(f"[{i}] {_shown(m)}" for i, m in enumerate(messages, start=1))
    return [
        {"role": "system", "content": f"{prompt}\n{_BATCH_ASK}"},
        {"role": "user", "content": listed},
    ]


def _asked(complete: Complete, messages: ChatMessages) -> str | None:
    """The model's reply; None (logged) if the call raised."""
    try:
        reply = complete(messages)
    except Exception:  # the model's client can fail any way: the fallback rates
        log.warning("memevict: the model call failed", exc_info=True)
        return None
    if inspect.isawaitable(reply):
        _close(reply)
        raise BadArgument(f"complete {complete!r} returned an awaitable: define it async def")
    return reply


async def _aasked(complete: Complete, messages: ChatMessages) -> str | None:
    """:func:`_asked` for an async ``complete``."""
    try:
        reply = complete(messages)
        return await reply if inspect.isawaitable(reply) else reply
    except Exception:  # the model's client can fail any way: the fallback rates
        log.warning("memevict: the model call failed", exc_info=True)
        return None


def _rating(reply: str | None) -> float | None:
    """The first number of a reply, clamped to [1, 10]; None if it has none."""
    found = _NUMBER.search(reply or "")
    return None if found is None else min(10.0, max(1.0, float(found.group())))


def _ratings(reply: str | None, n: int) -> list[float | None]:
    """The ratings of a batch reply's "<i>: <rating>" lines, for i = 1..n (None if absent)."""
    got: dict[int, float] = {}
    for i, value in _LINE.findall(reply or ""):
        got.setdefault(int(i), min(10.0, max(1.0, float(value))))
    return [got.get(i) for i in range(1, n + 1)]


def _fallback(fallback: Labeler, message: Message) -> float:
    log.warning("memevict: no rating from the model for a message: rated by %r", fallback)
    return importance_of(fallback, message)


async def _afallback(fallback: Labeler, message: Message) -> float:
    log.warning("memevict: no rating from the model for a message: rated by %r", fallback)
    return await aimportance_of(fallback, message)


def _shown(message: Message) -> str:
    """A message as the model reads it: who said it, then its text (the first 2,000
    characters)."""
    who = message.role or message.kind or "message"
    return f"({who}) {message.text[:2000]}"
