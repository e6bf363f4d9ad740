"""Labelling a transcript: a labeler (``memevict simulate --label``) gives
every memory turn without an importance or category its importance; turns the
transcript labels keep theirs. The labeler sees each turn's text and role."""

from __future__ import annotations

import asyncio
import dataclasses

from memevict.importance import Labeler, Message
from memevict.labelers import (
    BatchLabeler,
    CachedLabeler,
    aimportances_of,
    defined_async,
    importances_of,
)
from memevict.simulate.transcript import Event, MemoryTurn, Transcript


def label_transcript(transcript: Transcript, labeler: Labeler) -> Transcript:
    """The transcript with every unlabelled memory turn given ``importance_of(labeler,
    Message(text or "", role=role, kind=kind, tool_status=tool_status))``. A labeler
    defined with ``async def`` is run to completion here (outside any event
    loop; inside one, await alabel_transcript)."""
    if is_async(labeler):
        return asyncio.run(alabel_transcript(transcript, labeler))
    return _with(transcript, importances_of(labeler, _messages(transcript)))


async def alabel_transcript(transcript: Transcript, labeler: Labeler) -> Transcript:
    """label_transcript for a labeler that may answer with awaitables; one
    turn at a time, in order (a CachedLabeler with a batch labeler: all in one batch)."""
    return _with(transcript, await aimportances_of(labeler, _messages(transcript)))


def is_async(labeler: Labeler | BatchLabeler) -> bool:
    """Whether the labeler is defined with ``async def`` (as a function or
    as its class's ``__call__``)."""
    if isinstance(labeler, CachedLabeler):
        return is_async(labeler.labeler) or (labeler.batch is not None and is_async(labeler.batch))
    return defined_async(labeler)


def _unlabelled(transcript: Transcript) -> list[MemoryTurn]:
    return [e for e in transcript.events if isinstance(e, MemoryTurn) and e.importance is None]


def _messages(transcript: Transcript) -> list[Message]:
    return [
        Message(turn.text or "", role=turn.role, kind=turn.kind, tool_status=turn.tool_status)
        for turn in _unlabelled(transcript)
    ]


def _with(transcript: Transcript, importances: list[float]) -> Transcript:
    """The transcript with its unlabelled turns given these importances, in order."""
    if not importances:
        return transcript
    given = iter(importances)
    events: list[Event] = [
        dataclasses.replace(e, importance=next(given))
        if isinstance(e, MemoryTurn) and e.importance is None
        else e
        for e in transcript.events
    ]
    return dataclasses.replace(transcript, events=tuple(events))
