"""benchmarks/adapter_coverage.py: a tiny run of its main function through all three real
adapters, on a LoCoMo-shaped file of invented lines (with each known evidence defect) and
one generated conversation, against the test server."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.servers import Server

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "adapter_coverage.py"
BUDGET = 100  # tokens: the last ten turns of the tiny file (10 tokens each)
WIDTH = 40  # characters of every line of the tiny file: 10 tokens at 4 characters a token


@functools.cache
def _script() -> ModuleType:
    """The script as a module (registered, as its dataclasses need)."""
    spec = importlib.util.spec_from_file_location("adapter_coverage", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _line(text: str) -> str:
    return text.ljust(WIDTH, ".")[:WIDTH]


def _tiny() -> dict[str, Any]:
    """Two sessions of 15 turns. Ana (speaker_a, the user) opens the first and Ben the
    second (his second message in a row: no model call); Ana speaks twice in a row once."""
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


def test_the_tiny_file_is_read_with_its_defects_fixed(tmp_path: Path) -> None:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(_tiny()))
    (conversation,) = _script().read_path(path)
    assert [q.evidence for q in conversation.questions] == [
        ("D1:3", "D2:12"),
        ("D2:5", "D1:5"),
        ("D2:14",),
    ]
    assert conversation.turns[1].text.endswith(" [shares a photo: a photo of a red kayak]")
    notes = conversation.notes
    assert notes["evidence strings holding several ids"] == 2
    assert notes["evidence ids fixed ('D:' or leading zeros)"] == 2
    assert notes["evidence ids naming no turn (dropped)"] == ["D9:9", "D7:1"]
    assert notes["questions without valid evidence (dropped), by category"] == {5: 1}
    calls = _script().calls_of(conversation.turns)
    # D1:15 answers D1:13 and D1:14 together; D2:1 (Ben again) rides with D2:2's call,
    # whose previous exchange is then D2:1 and the last user message before it
    assert [t.id for t in calls[6].users] == ["D1:13", "D1:14"]
    assert calls[6].answer.id == "D1:15" and calls[6].previous == ("D1:12", "D1:11")
    assert [t.id for t in calls[7].prior] == ["D2:1"] and calls[7].previous == ("D2:1", "D1:14")
    assert calls[-1].answer is None and calls[-1].previous == ("D2:15", "D2:14")
    # the same as a list of samples, sessions under "conversation"
    sample = _tiny()
    listed = {"sample_id": "s1", "qa": sample.pop("qa"), "conversation": sample}
    path.write_text(json.dumps([listed]))
    (again,) = _script().read_path(path)
    assert again.name == "s1" and again.questions == conversation.questions
    assert again.turns == conversation.turns


def test_a_tiny_run_through_every_adapter(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, out = tmp_path / "tiny.json", tmp_path / "coverage.json"
    path.write_text(json.dumps(_tiny()))
    args = [str(path), "--generated", "1", "--budgets", str(BUDGET), "--url", server.url]
    args += ["--policy", "half_life_memories=300", "--json", str(out)]
    assert _script().main(args) == 0
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["policy"] == {"half_life_memories": 300.0}

    tiny, made = report["conversations"]
    assert (tiny["name"], tiny["turns"], tiny["questions"]) == ("tiny", 30, 3)
    assert made["name"] == "generated-1" and made["questions"] > 0
    adapters = ["openai", "langchain", "pydantic-ai"]
    for conversation in (tiny, made):
        assert [r["adapter"] for r in conversation["replays"]] == adapters
        for replay in conversation["replays"]:
            assert replay["over_budget"] == 0 and replay["max_history_tokens"] <= BUDGET
            assert 0 < replay["final_tokens"] <= BUDGET and replay["final_messages"] > 0
            assert 0 <= replay["covered"] <= replay["questions"] == conversation["questions"]
            assert 0 < replay["recent_calls"] < replay["calls"]

    # The tiny file's FIFO by hand: 30 turns of 10 tokens, so the newest ten (D2:6..D2:15)
    # fit in 100 tokens; they hold D2:12 (Q1) and D2:14 (Q3), not D2:5 or D1:5 (Q2).
    # Its calls: session 1 has 7 answers (Ana twice in a row once: D1:13, D1:14), D2:1 is
    # Ben's second message in a row (no call), session 2 has 7 more, then the final call.
    for replay in tiny["replays"]:
        assert replay["fifo_covered"] == 2
        assert replay["calls"] == 7 + 7 + 1
    # Every row printed, the totals too
    for adapter in adapters:
        assert f"\n{'tiny':<16} {adapter:<11} {BUDGET:>6} {3:>4} " in printed
        assert f"\n{'TOTAL':<16} {adapter:<11} {BUDGET:>6} " in printed
    totals = {t["adapter"]: t for t in report["totals"]}
    for adapter in adapters:
        rows = [r for c in (tiny, made) for r in c["replays"] if r["adapter"] == adapter]
        assert totals[adapter]["covered"] == sum(r["covered"] for r in rows)
        assert totals[adapter]["questions"] == 3 + made["questions"]
