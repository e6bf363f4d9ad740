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

import pytest

from tests.locomo_fixture import tiny_sample
from tests.servers import Server

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "adapter_coverage.py"
BUDGET = 100  # tokens: the last ten turns of the tiny file (10 tokens each)


@functools.cache
def _script() -> ModuleType:
    """The script as a module (registered, as its dataclasses need)."""
    spec = importlib.util.spec_from_file_location("adapter_coverage", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_tiny_file_is_read_as_calls(tmp_path: Path) -> None:
    # (the reader itself, memevict.simulate.locomo, is tested in test_locomo.py)
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(tiny_sample()))
    (conversation,) = _script().read_path(path)
    assert conversation.name == "tiny" and len(conversation.turns) == 30
    assert [q.category for q in conversation.questions] == [1, 2, 4]
    assert conversation.notes["evidence ids naming no turn (dropped)"] == 2
    calls = _script().calls_of(conversation.turns)
    # D1:15 answers D1:13 and D1:14 together; D2:1 (Ben again) rides with D2:2's call,
    # whose previous exchange is then D2:1 and the last user message before it
    assert [t.id for t in calls[6].users] == ["D1:13", "D1:14"]
    assert calls[6].answer.id == "D1:15" and calls[6].previous == ("D1:12", "D1:11")
    assert [t.id for t in calls[7].prior] == ["D2:1"] and calls[7].previous == ("D2:1", "D1:14")
    assert calls[-1].answer is None and calls[-1].previous == ("D2:15", "D2:14")
    # the same as a list of samples, sessions under "conversation": named by sample id
    sample = tiny_sample()
    listed = {"sample_id": "s1", "qa": sample.pop("qa"), "conversation": sample}
    path.write_text(json.dumps([listed]))
    (again,) = _script().read_path(path)
    assert again.name == "s1" and again.questions == conversation.questions
    assert again.turns == conversation.turns


def test_a_tiny_run_through_every_adapter(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, out = tmp_path / "tiny.json", tmp_path / "coverage.json"
    path.write_text(json.dumps(tiny_sample()))
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


def test_per_question_through_the_openai_session(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--per-question: each of the tiny file's 3 questions asked as the latest user message,
    recall off and on, against FIFO, search alone and FIFO + slice (by hand below); and
    the harder query, the last user message, with the question not added."""
    path, out = tmp_path / "tiny.json", tmp_path / "coverage.json"
    path.write_text(json.dumps(tiny_sample()))
    args = [str(path), "--budgets", str(BUDGET), "--url", server.url, "--adapters", "openai"]
    args += ["--per-question", "--json", str(out)]
    assert _script().main(args) == 0
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())["per_question"]
    assert report["shares"] == [0.1, 0.2, 0.3]
    [total] = report["question"]["totals"]
    [row] = report["question"]["conversations"]
    assert row["conversation"] == "tiny"
    for found in (total, row):
        assert found["budget"] == BUDGET and found["questions"] == 3
        # FIFO in 100 less the question's 1 token: the newest 9 turns (D2:7..D2:15), which
        # hold D2:12 (Q1) and D2:14 (Q3). The questions ("Q1?") hold no term a turn holds:
        # search alone takes nothing, and FIFO + slice is FIFO at every share.
        assert (found["fifo"], found["search"], found["fifo_slice"]) == (2, 0, 2)
        assert found["slices"] == {"0.1": 2, "0.2": 2, "0.3": 2} and found["share"] == 0.1
        assert 0 <= found["recall_off"] <= found["recall_on"] <= 3
    # Harder: the query "Ana says line 14" (D2:14, the last user message) in the whole
    # 100. Its terms: "says", "line" in all 30 turns, "ana" in Ana's 15, "14" in D1:14 and
    # D2:14. Search alone: D2:14, D1:14, then Ana's 8 newest others (D2:12 .. D2:2, D1:13,
    # D1:11): Q1 and Q3. FIFO: D2:6..D2:15, Q1 and Q3. Each slice adds D1:14 first (then
    # Ana's older turns), which answers nothing more.
    [harder] = report["previous"]["totals"]
    assert (harder["fifo"], harder["search"], harder["fifo_slice"]) == (2, 2, 2)
    assert 0 <= harder["recall_off"] <= 3 and 0 <= harder["recall_on"] <= 3
    for heading in ("the question as the query", "harder: the last user message as the query"):
        assert f"Per question, through MemevictSession ({heading}" in printed
    assert f"\n{'tiny':<16} {BUDGET:>6} {3:>4} " in printed
    assert f"\n{'TOTAL':<16} {BUDGET:>6} {3:>4} " in printed
