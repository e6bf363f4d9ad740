"""A model as the labeler, and rating each message once.

:func:`chat_labeler` makes a labeler of any chat-completion call. Give it ``complete``: a
function from a list of chat messages (``{"role": ..., "content": ...}``) to the text of the
model's reply, sync or async. That is a line of glue for any client; for an async adapter,
the async client's::

    from openai import AsyncOpenAI

    client = AsyncOpenAI()

    async def complete(messages):
        reply = await client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        return reply.choices[0].message.content

    labeler = chat_labeler(complete)
    session = MemevictSession("user-42", url="redis://localhost:6379", labeler=labeler)

A sync ``complete`` (``OpenAI()`` and ``def``) serves sync and async callers alike: awaited
(an async adapter, :func:`aimportances_of`), it runs in a worker thread of asyncio's
default executor, so that the event loop goes on while the model answers. An async
``complete`` serves only async callers.

The model is asked to rate the message on memevict's scale (:data:`RATING_PROMPT`: the
categories of :data:`memevict.importance.CATEGORIES`, 1 to 10). The first number of its
reply is the importance, clamped to [1, 10]. A reply without a number, or a call that
raises, is rated by ``fallback`` (the built-in rules) and logged to ``memevict.labelers``:
a model outage costs ranking quality, never a turn.

After a call that raised, the model is not asked again for ``backoff_s`` (10 s): the
fallback rates meanwhile, with no call. Each further failure in a row doubles the pause,
up to :data:`MAX_BACKOFF_S` (5 minutes); once a pause is over, one call tries the model
again (the others keep to the fallback until it answers), and the first answer ends the
backoff. An outage or a rate limit lasts seconds to minutes, and each call to a model that
is down costs a turn its client's timeout and retries, where the rules cost microseconds;
without the pause, a turn of 30 new messages made 31 failing calls.

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

import asyncio
import inspect
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeAlias

from memevict.commands import finite_number
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
    "MAX_BACKOFF_S",
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
# The longest pause of a chat labeler after failed calls in a row (see the module's docstring).
MAX_BACKOFF_S = 300.0
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_LINE = re.compile(r"^\s*\[?(\d+)\]?\s*[:.)-]\s*(-?\d+(?:\.\d+)?)", re.M)


class BatchLabeler(Protocol):
    """Rates a list of messages at once: their importances in order, or an awaitable."""

    def __call__(self, messages: list[Message], /) -> list[float] | Awaitable[list[float]]: ...


class CachedLabeler:
    """A labeler that rates each distinct message once: ``labeler`` rates one message,
    ``batch`` (optional) a list of them; answers are kept in an LRU of ``size`` messages.
    Either may be async. Every answer is checked as :func:`importance_of` checks one.

    ``blocking=True`` says a sync ``labeler`` and ``batch`` wait on I/O (a model over the
    network): awaited (:func:`aimportance_of`, :func:`aimportances_of`, an async adapter),
    they run in a worker thread (``asyncio.to_thread``) instead of stalling the event
    loop. Called synchronously, they run in the caller's thread as any labeler does."""

    def __init__(
        self,
        labeler: Labeler,
        *,
        batch: BatchLabeler | None = None,
        size: int = 10_000,
        blocking: bool = False,
    ) -> None:
        if not callable(labeler) or (batch is not None and not callable(batch)):
            raise BadArgument("CachedLabeler takes a labeler (and a batch labeler) to call")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise BadArgument(f"size must be a whole number >= 1, got {size!r}")
        self.labeler, self.batch, self.size, self.blocking = labeler, batch, size, blocking
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

    async def aimportance(self, message: Message) -> float:
        """The importance of ``message``, awaited: what :func:`aimportance_of` calls. A
        blocking labeler runs in a worker thread; the answer is cached as a call's is."""
        known = self._cached(message)
        if known is not None:
            return known
        if self.blocking and not defined_async(self.labeler):
            found = await asyncio.to_thread(self.labeler, message)
            return await self._keep_awaited(message, found)
        return await self._rated_async(message)

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
    """:func:`importances_of` for any labeler, sync or async (a blocking
    :class:`CachedLabeler`'s calls in a worker thread)."""
    if isinstance(labeler, CachedLabeler) and labeler.batch is not None:
        new = _uncached(labeler, messages)
        if new:
            if labeler.blocking and not defined_async(labeler.batch):
                found = await asyncio.to_thread(labeler.batch, new)
            else:
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
    backoff_s: float = 10.0,
) -> CachedLabeler:
    """A labeler asking a chat model (``complete``: chat messages -> the reply's text, sync
    or async) to rate each message once, on :data:`RATING_PROMPT`'s scale; ``batch=False``
    sends one request per message even for a list. After a failed call the model is left
    alone for ``backoff_s`` seconds, doubling while it keeps failing (0: no pause). See the
    module's docstring."""
    if not callable(complete):
        raise BadArgument(f"complete must be callable, got {complete!r}")
    seconds = finite_number(backoff_s)
    if seconds is None or seconds < 0:
        raise BadArgument(f"backoff_s must be a finite number >= 0, got {backoff_s!r}")
    model = _Model(complete, seconds)
    if model.is_async:

        async def arate(message: Message) -> float:
            reply = await model.aask(_one(prompt, message))
            found = _rating(reply)
            return found if found is not None else await _afallback(fallback, message, reply)

        async def arate_many(messages: list[Message]) -> list[float]:
            found = _ratings(await model.aask(_many(prompt, messages)), len(messages))
            pairs = zip(messages, found, strict=True)
            return [x if x is not None else await arate(m) for m, x in pairs]

        return CachedLabeler(arate, batch=arate_many if batch else None, size=size)

    # A sync complete waits on the network: awaited, it runs in a worker thread.
    def rate(message: Message) -> float:
        reply = model.ask(_one(prompt, message))
        found = _rating(reply)
        return found if found is not None else _fallback(fallback, message, reply)

    def rate_many(messages: list[Message]) -> list[float]:
        found = _ratings(model.ask(_many(prompt, messages)), len(messages))
        return [x if x is not None else rate(m) for m, x in zip(messages, found, strict=True)]

    return CachedLabeler(rate, batch=rate_many if batch else None, size=size, blocking=True)


class _Model:
    """Asks the model through ``complete``, except for a while after a call that raised
    (the backoff of the module's docstring). Its state is shared by the threads that ask."""

    def __init__(self, complete: Complete, backoff_s: float) -> None:
        self.complete, self.backoff_s = complete, backoff_s
        self.is_async = defined_async(complete)
        self.failures = 0  # failed calls in a row
        self.paused_until = 0.0  # time.monotonic() before which the model is not asked
        # Counts the failures recorded: a call that fails after another failure was
        # recorded since it began (many concurrent calls when the model went down) is one
        # outage, not a failure in a row that doubles the pause again.
        self._era = 0
        self._lock = threading.Lock()

    def _pause(self) -> float:
        longest = max(self.backoff_s, MAX_BACKOFF_S)
        return min(self.backoff_s * 2.0 ** min(self.failures - 1, 64), longest)

    def _ticket(self) -> int | None:
        """The era a call may begin in, or None while the model is paused."""
        with self._lock:
            if self.failures:
                now = time.monotonic()
                if now < self.paused_until:
                    return None
                # This call tries the model again; the others keep to the fallback
                # until it is answered (or for another pause, if it fails).
                self.paused_until = now + self._pause()
            return self._era

    def _failed(self, ticket: int) -> None:
        """Called in the ``except`` block of a failed call, whose error is logged."""
        with self._lock:
            if ticket == self._era:
                self.failures += 1
                self._era += 1
                self.paused_until = time.monotonic() + self._pause()
            pause = self._pause()
        log.warning(
            "memevict: the model call failed: rated by the fallback, the model not asked for %g s",
            pause,
            exc_info=True,
        )

    def _answered(self) -> None:
        with self._lock:
            self.failures, self.paused_until = 0, 0.0

    def ask(self, messages: ChatMessages) -> str | None:
        """The model's reply; None if the call raised (logged) or the model is paused."""
        ticket = self._ticket()
        if ticket is None:
            return None
        try:
            reply = self.complete(messages)
        except Exception:  # the model's client can fail any way: the fallback rates
            self._failed(ticket)
            return None
        if inspect.isawaitable(reply):
            _close(reply)
            raise BadArgument(
                f"complete {self.complete!r} returned an awaitable: define it async def"
            )
        self._answered()
        return reply

    async def aask(self, messages: ChatMessages) -> str | None:
        """:meth:`ask` for an async ``complete``."""
        ticket = self._ticket()
        if ticket is None:
            return None
        try:
            found = self.complete(messages)
            reply = await found if inspect.isawaitable(found) else found
        except Exception:  # the model's client can fail any way: the fallback rates
            self._failed(ticket)
            return None
        self._answered()
        return reply


def _one(prompt: str, message: Message) -> ChatMessages:
    return [{"role": "system", "content": prompt}, {"role": "user", "content": _shown(message)}]


def _many(prompt: str, messages: list[Message]) -> ChatMessages:
    listed = "\n\n".join(f"[{i}] {_shown(m)}" for i, m in enumerate(messages, start=1))
    return [
        {"role": "system", "content": f"{prompt}\n{_BATCH_ASK}"},
        {"role": "user", "content": listed},
    ]


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


def _no_rating(fallback: Labeler, reply: str | None) -> None:
    # A failed call or a paused model was logged once by _Model, not once per message.
    if reply is not None:
        log.warning("memevict: no rating from the model for a message: rated by %r", fallback)


def _fallback(fallback: Labeler, message: Message, reply: str | None) -> float:
    _no_rating(fallback, reply)
    return importance_of(fallback, message)


async def _afallback(fallback: Labeler, message: Message, reply: str | None) -> float:
    _no_rating(fallback, reply)
    return await aimportance_of(fallback, message)


def _shown(message: Message) -> str:
    """A message as the model reads it: who said it, then its text (the first 2,000
    characters)."""
    who = message.role or message.kind or "message"
    return f"({who}) {message.text[:2000]}"
