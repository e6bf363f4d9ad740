"""Labelers that tests/test_importance.py loads by name with load_labeler."""

from __future__ import annotations

from memevict.importance import Message


def seven(message: Message) -> float:
    return 7.0


async def async_nine(message: Message) -> float:
    return 9.0


class Constant:
    """A callable object as a labeler: the same importance for every message."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __call__(self, message: Message) -> float:
        return self.value


HALF = Constant(0.5)

NOT_CALLABLE = 42
