"""A tiny LoCoMo-shaped sample of invented lines, with each known evidence defect."""

from __future__ import annotations

from typing import Any

WIDTH = 40  # characters of every line: 10 tokens at 4 characters a token


def _line(text: str) -> str:
    return text.ljust(WIDTH, ".")[:WIDTH]


def tiny_sample() -> dict[str, Any]:
    """Two sessions of 15 turns. Ana (speaker_a, the user) opens the first and Ben the
    second (his second message in a row); Ana speaks twice in a row once."""
    one = ["Ana", "Ben"] * 6 + ["Ana", "Ana", "Ben"]  # D1:13 and D1:14 both Ana's
    two = ["Ben", "Ana"] * 7 + ["Ben"]
    sample: dict[str, Any] = {"speaker_a": "Ana", "speaker_b": "Ben"}
    for number, speakers in ((1, one), (2, two)):
        sample[f"session_{number}_date_time"] = f"1:00 pm on {number} May, 2023"
        sample[f"session_{number}"] = [
            {"speaker": who, "dia_id": f"D{number}:{i}", "text": _line(f"{who} says line {i}")}
            for i, who in enumerate(speakers, start=1)
        ]
    sample["session_1"][1]["blip_caption"] = "a photo of a red kayak"
    sample["qa"] = [
        # two ids in one string
        {"question": "Q1?", "answer": "a", "evidence": ["D1:3; D2:12"], "category": 1},
        # "D:2:5" and a leading zero
        {"question": "Q2?", "answer": "b", "evidence": ["D:2:5", "D1:05"], "category": 2},
        # a space-separated pair, one of which names no turn
        {"question": "Q3?", "answer": "c", "evidence": ["D2:14 D9:9"], "category": 4},
        # adversarial, its only id naming no turn: dropped
        {"question": "Q4?", "evidence": ["D7:1"], "category": 5, "adversarial_answer": "d"},
    ]
    return sample
