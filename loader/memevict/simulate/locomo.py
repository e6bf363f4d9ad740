"""LoCoMo's public format as transcripts, so ``memevict simulate`` reruns the benchmark.

LoCoMo (Maharana et al., ACL 2024; snap-research/locomo, CC BY-NC 4.0) ships
``locomo10.json``: a list of samples, each with its sessions under ``conversation`` and
its questions under ``qa``. A sample saved alone may have its sessions at the top level.
Both are read. Sessions are ``session_<N>`` (lists of turns ``{speaker, dia_id, text}``,
some with a ``blip_caption`` of a shared photo) with ``session_<N>_date_time`` ("1:56 pm
on 8 May, 2023"); ``speaker_a`` and ``speaker_b`` name the two people. Questions are
``{question, answer, evidence: [dia_id, ...], category}``.

Each sample becomes one unlabelled :class:`Transcript` (``--label`` rates it): a memory
turn per dialogue turn, id its ``dia_id``, text its text (and "[shares a photo: ...]"),
role "user" for speaker_a and "assistant" for speaker_b, speaker and session as given.
A session starts at its date when that parses and is later than the turn before it;
turns follow each other by ``turn_ms``. Every question is asked at the end.

The evidence ids have known defects, fixed or dropped and counted in
``Transcript.notes``: several ids in one string ("D8:6; D9:17", "D9:1 D4:4"), "D:11:26",
leading zeros ("D30:05"), and ids naming no turn (dropped; a question left without
evidence is dropped too, counted by category). Turns of a third speaker are dropped and
a repeated ``dia_id`` renamed (evidence names the first), both counted.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memevict.simulate.transcript import (
    START_MS,
    TURN_MS,
    BadTranscript,
    MemoryTurn,
    Question,
    Transcript,
)

_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y")


def is_locomo(data: object) -> bool:
    """Whether parsed JSON is LoCoMo's shape: a sample, or a list of samples."""
    samples = data if isinstance(data, list) else [data]
    return bool(samples) and all(
        isinstance(s, dict) and isinstance(s.get("conversation", s), dict)
        and "speaker_a" in s.get("conversation", s)
        for s in samples
    )  # fmt: skip


def read_locomo(path: str | Path, turn_ms: int = TURN_MS) -> list[Transcript]:
    """The transcripts of a LoCoMo file (one per sample; raises BadTranscript if the file
    is not LoCoMo's shape)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadTranscript(f"{path}: not a readable JSON file ({error})") from None
    if not is_locomo(data):
        raise BadTranscript(
            f"{path}: not LoCoMo's format (a sample with speaker_a, speaker_b and session_<N>, "
            "or a list of samples with them under 'conversation')"
        )
    if isinstance(data, dict):
        return [locomo_transcript(data, str(path), turn_ms)]
    return [
        locomo_transcript(sample, f"{path}:{sample.get('sample_id') or i}", turn_ms)
        for i, sample in enumerate(data)
    ]


def canonical(dia_id: str) -> str | None:
    """``D<session>:<turn>`` without leading zeros (from "D:11:26" and "D30:05" too)."""
    found = _EVIDENCE.fullmatch(dia_id.strip())
    return None if found is None else f"D{int(found[1])}:{int(found[2])}"


def _session_ms(value: object) -> int | None:
    for form in _DATE_FORMATS:
        try:
            moment = datetime.strptime(str(value).strip(), form).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
        return int(moment.timestamp() * 1000)
    return None


def _next_at(before: int | None, started: int | None, turn_ms: int) -> int:
    """A turn's time: its session's start if it opens one that parses and is later, else
    ``turn_ms`` after the turn before (the first turn: START_MS without a date)."""
    after = START_MS if before is None else before + turn_ms
    if started is None:
        return after
    return started if before is None else max(after, started)


def _text(turn: Mapping[str, Any]) -> str:
    text = str(turn.get("text") or "")
    caption = turn.get("blip_caption")
    return f"{text} [shares a photo: {caption}]" if caption else text


def locomo_transcript(sample: Mapping[str, Any], source: str, turn_ms: int = TURN_MS) -> Transcript:
    """One LoCoMo sample (its sessions at the top level or under ``conversation``)."""
    sessions = sample.get("conversation", sample)
    roles = {sessions["speaker_a"]: "user", sessions["speaker_b"]: "assistant"}
    numbered = sorted((int(m[1]), key) for key in sessions if (m := _SESSION.fullmatch(key)))
    notes: Counter[str] = Counter()
    events: list[MemoryTurn] = []
    ids: dict[str, str] = {}  # canonical dia_id -> the turn's id
    at: int | None = None  # of the turn before
    for number, key in numbered:
        started = _session_ms(sessions.get(f"{key}_date_time"))
        first = True
        for raw in sessions[key] or []:
            speaker = raw.get("speaker")
            if speaker not in roles:
                notes["turns of a third speaker (dropped)"] += 1
                continue
            at = _next_at(at, started if first else None, turn_ms)
            first = False
            id = str(raw.get("dia_id") or f"D{number}:{len(events) + 1}")
            name = canonical(id) or id
            if name in ids:  # (evidence names the first)
                notes["repeated turn ids (renamed)"] += 1
                id = name = f"{id}#{len(events)}"
            ids[name] = id
            events.append(
                MemoryTurn(
                    id, None, at, text=_text(raw), role=roles[speaker], speaker=str(speaker),
                    session=str(number),
                )
            )  # fmt: skip
    if not events:
        raise BadTranscript(f"{source}: no turns of speaker_a or speaker_b")
    questions = []
    for qa in sample.get("qa") or []:
        evidence = _evidence(qa.get("evidence"), ids, notes)
        category = None if qa.get("category") is None else str(qa["category"])
        if not evidence:
            notes[f"questions without evidence naming a turn (dropped), category {category}"] += 1
            continue
        questions.append(Question(str(qa.get("question")), evidence, None, category))
    return Transcript(tuple(events), source, tuple(questions), tuple(sorted(notes.items())))


def _evidence(raw: object, ids: Mapping[str, str], notes: Counter[str]) -> tuple[str, ...]:
    """The turn ids a question's evidence names, its defects fixed or dropped and counted."""
    found: list[str] = []
    for entry in raw if isinstance(raw, list) else []:
        pieces = [p for p in re.split(r"[;,\s]+", str(entry)) if p]
        if len(pieces) > 1:
            notes["evidence strings holding several ids (split)"] += 1
        for piece in pieces:
            fixed = canonical(piece)
            if fixed is not None and fixed != piece:
                notes["evidence ids written 'D:n:n' or with leading zeros (fixed)"] += 1
            if fixed is None or fixed not in ids:
                notes["evidence ids naming no turn (dropped)"] += 1
            else:
                found.append(ids[fixed])
    return tuple(dict.fromkeys(found))
