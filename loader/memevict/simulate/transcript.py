"""A transcript: the memory turns and actions of one agent conversation, the
questions asked about it, and the reader of a user's own log (JSONL, one JSON
object a line).

A memory turn remembers something; an action touches, demotes, whitelists or
forgets an earlier memory. Every event has its time (``at``, ms since the
epoch), resolved when the transcript is read: a memory line without ``at``
comes ``turn_ms`` after the line before it, an action without ``at`` happens at
the time of the line before it.

A question line names the turns that answer it (``evidence``) and, optionally,
when it is asked (``at``; default: after the last event). It is no event: the
replay checks, when the question is asked, which of its evidence turns the
window holds. A memory turn without ``importance`` or ``category`` is
unlabelled: a labeler (``memevict simulate --label``) gives it an importance
before it is replayed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from memevict.commands import MAX_ID_BYTES, MAX_NOW_MS, finite_number
from memevict.errors import MemevictError
from memevict.importance import CATEGORIES

IMPORTANCE = CATEGORIES  # the reference importances (docs/rules.md), by category
START_MS = 1_700_000_000_000
TURN_MS = 10_000

ActionKind = Literal["touch", "demote", "whitelist", "forget"]
ACTIONS: tuple[str, ...] = get_args(ActionKind)
_TURN_FIELDS = {
    "id",
    "importance",
    "category",
    "text",
    "whitelist",
    "critical",
    "at",
    "role",
    "kind",
    "tool_status",
    "speaker",
    "session",
}
_ACTION_FIELDS = {"action", "id", "at"}
_QUESTION_FIELDS = {"question", "evidence", "at"}


class BadTranscript(MemevictError, ValueError):
    """A transcript line is malformed; the message names the line."""


@dataclass(frozen=True, slots=True)
class MemoryTurn:
    """Remember ``id`` (an upsert if it exists) at ``at``."""

    id: str
    importance: float | None  # None: unlabelled, a labeler decides before the replay
    at: int
    text: str | None = None
    whitelist: bool = False
    critical: bool = False
    category: str | None = None
    role: str | None = None  # user, assistant, system, tool, ...: passed to the labeler
    kind: str | None = None  # function_call, function_call_output, ...: to the labeler too
    tool_status: str | None = None  # a tool result's status (error, ok, ...): the same
    speaker: str | None = None  # who said it, for reports
    session: str | None = None  # which session of a multi-session conversation


@dataclass(frozen=True, slots=True)
class Action:
    """Touch, demote, whitelist or forget the earlier memory ``id`` at ``at``."""

    action: ActionKind
    id: str
    at: int


Event = MemoryTurn | Action


@dataclass(frozen=True, slots=True)
class Question:
    """A question about the conversation: the turns whose memories answer it
    (any one is enough to answer, all of them to answer fully), and when it is
    asked (None: at the end)."""

    question: str
    evidence: tuple[str, ...]
    at: int | None = None
    category: str | None = None  # the benchmark's kind of question (LoCoMo's 1-5), if any


@dataclass(frozen=True, slots=True)
class Transcript:
    events: tuple[Event, ...]
    source: str
    questions: tuple[Question, ...] = ()
    # What reading the source fixed or dropped, counted (a LoCoMo file's evidence defects).
    notes: tuple[tuple[str, int], ...] = ()

    @property
    def unlabelled(self) -> int:
        """Memory turns without an importance yet."""
        return sum(isinstance(e, MemoryTurn) and e.importance is None for e in self.events)

    @property
    def turns(self) -> int:
        return sum(isinstance(e, MemoryTurn) for e in self.events)

    @property
    def actions(self) -> int:
        return len(self.events) - self.turns

    @property
    def critical(self) -> frozenset[str]:
        return frozenset(e.id for e in self.events if isinstance(e, MemoryTurn) and e.critical)


def read_jsonl(path: str | Path, turn_ms: int = TURN_MS) -> Transcript:
    """Reads and checks a whole transcript file; raises BadTranscript naming
    the first malformed line, so nothing runs on a bad file."""
    with open(path, encoding="utf-8") as lines:
        return parse_lines(lines, str(path), turn_ms)


def parse_lines(lines: Iterable[str], source: str, turn_ms: int = TURN_MS) -> Transcript:
    events: list[Event] = []
    questions: list[tuple[int, Question]] = []  # with their line numbers
    known: set[str] = set()  # remembered and not forgotten since
    said: set[str] = set()  # remembered by any line
    last_at: int | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = _object(line)
            if "question" in data:
                questions.append((number, _question(data)))
                continue
            event = _event(data, last_at, turn_ms)
            if isinstance(event, Action) and event.id not in known:
                raise ValueError(f"{event.action} of {event.id!r}, which no earlier line remembers")
        except ValueError as error:
            raise BadTranscript(f"{source} line {number}: {error}") from None
        if isinstance(event, MemoryTurn):
            known.add(event.id)
            said.add(event.id)
        elif event.action == "forget":
            known.discard(event.id)
        events.append(event)
        last_at = event.at
    if not any(isinstance(e, MemoryTurn) for e in events):
        raise BadTranscript(f"{source}: no memory turns")
    for number, question in questions:
        unknown = [e for e in question.evidence if e not in said]
        if unknown:
            raise BadTranscript(
                f"{source} line {number}: evidence {unknown[0]!r} is not the id of any memory turn"
            )
    return Transcript(tuple(events), source, tuple(q for _, q in questions))


def _question(data: dict[str, object]) -> Question:
    _only(data, _QUESTION_FIELDS)
    text = data["question"]
    if not isinstance(text, str) or not text:
        raise ValueError('"question" must be a non-empty string')
    _utf8(text, "question")
    evidence = data.get("evidence")
    if (
        not isinstance(evidence, list)
        or not evidence
        or not all(isinstance(e, str) and e for e in evidence)
    ):
        raise ValueError('"evidence" must be a non-empty list of memory ids')
    return Question(text, tuple(dict.fromkeys(evidence)), _at(data.get("at"), None))


def _object(line: str) -> dict[str, object]:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    return data


def _event(data: dict[str, object], last_at: int | None, turn_ms: int) -> Event:
    memory_id = data.get("id")
    if not isinstance(memory_id, str) or not 1 <= len(_utf8(memory_id, "id")) <= MAX_ID_BYTES:
        raise ValueError(f'"id" must be a string of 1..{MAX_ID_BYTES} bytes')
    at = _at(data.get("at"), last_at)
    if "action" in data:
        _only(data, _ACTION_FIELDS)
        action = data["action"]
        if action not in ACTIONS:
            raise ValueError(f'"action" must be one of {", ".join(ACTIONS)}, got {action!r}')
        when = at if at is not None else (last_at if last_at is not None else START_MS)
        return Action(action, memory_id, when)  # type: ignore[arg-type]
    _only(data, _TURN_FIELDS)
    if at is None:
        at = last_at + turn_ms if last_at is not None else START_MS
    if "importance" in data and "category" in data:
        raise ValueError('a memory turn takes at most one of "importance" and "category"')
    category = data.get("category")
    importance: float | None = None
    if "category" in data:
        if not isinstance(category, str) or category not in IMPORTANCE:
            raise ValueError(f'"category" must be one of {", ".join(IMPORTANCE)}, got {category!r}')
        importance = IMPORTANCE[category]
    elif "importance" in data:
        importance = _importance(data["importance"])
    text = data.get("text")
    if text is not None and not isinstance(text, str):
        raise ValueError('"text" must be a string')
    if text is not None:
        _utf8(text, "text")
    return MemoryTurn(
        memory_id,
        importance,
        at,
        text=text,
        whitelist=_flag(data, "whitelist"),
        critical=_flag(data, "critical"),
        category=category if isinstance(category, str) else None,
        role=_name(data, "role"),
        kind=_name(data, "kind"),
        tool_status=_name(data, "tool_status"),
        speaker=_name(data, "speaker"),
        session=_name(data, "session"),
    )


def _name(data: Mapping[str, object], field: str) -> str | None:
    """role, kind, tool_status, speaker and session: a string (a session may be a
    number)."""
    value = data.get(field)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and field == "session":
        return str(value)
    if not isinstance(value, str):
        raise ValueError(f'"{field}" must be a string, got {value!r}')
    _utf8(value, field)
    return value


def _utf8(value: str, what: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate escape such as "\\ud800"
        raise ValueError(f'"{what}" is not valid Unicode: {value[:40]!r}') from None


def _only(data: Mapping[str, object], allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(map(repr, unknown))}")


def _importance(value: object) -> float:
    x = finite_number(value)
    if x is None or x <= 0:
        raise ValueError(f'"importance" must be a finite number > 0, got {value!r}')
    return x


def _at(value: object, last_at: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_NOW_MS:
        raise ValueError(f'"at" must be whole ms since the epoch (0..{MAX_NOW_MS}), got {value!r}')
    if last_at is not None and value < last_at:
        raise ValueError(f'"at" {value} is before the previous line\'s {last_at}')
    return value


def _flag(data: Mapping[str, object], name: str) -> bool:
    value = data.get(name, False)
    if not isinstance(value, bool):
        raise ValueError(f'"{name}" must be true or false, got {value!r}')
    return value
