"""Labelers that tests/test_simulate.py names by dotted path (``--label``)."""

from __future__ import annotations

from memevict.importance import Message

seen: list[Message] = []


def by_role(message: Message) -> float:
    """10 for what the system says, 1 for anything else; remembers what it saw."""
    seen.append(message)
    return 10.0 if message.role == "system" else 1.0


async def by_role_async(message: Message) -> float:
    return by_role(message)


def broken(message: Message) -> float:
    """Answers an importance no memory may have."""
    return -1.0


not_callable = 42
