"""memevict.simulate.locomo and the labeler's quality: LoCoMo's public format read as
transcripts (both shapes, each evidence defect fixed or dropped and counted), and
``memevict simulate`` on such a file, printing AUC and the per-importance table beside
coverage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memevict.cli import main
from memevict.simulate.locomo import read_locomo
from memevict.simulate.quality import auc, labeler_quality
from memevict.simulate.transcript import BadTranscript, MemoryTurn, Question, Transcript
from tests.locomo_fixture import tiny_sample
from tests.servers import Server


def test_a_sample_is_read_with_its_defects_fixed_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(tiny_sample()))
    (t,) = read_locomo(path)
    assert t.source == str(path) and t.unlabelled == t.turns == 30
    assert [(q.evidence, q.category) for q in t.questions] == [
        (("D1:3", "D2:12"), "1"),  # "D1:3; D2:12"
        (("D2:5", "D1:5"), "2"),  # "D:2:5", "D1:05"
        (("D2:14",), "4"),  # "D2:14 D9:9": D9:9 names no turn
    ]
    assert dict(t.notes) == {
        "evidence strings holding several ids (split)": 2,
        "evidence ids written 'D:n:n' or with leading zeros (fixed)": 2,
        "evidence ids naming no turn (dropped)": 2,
        "questions without evidence naming a turn (dropped), category 5": 1,
    }
    turns = [e for e in t.events if isinstance(e, MemoryTurn)]
    assert turns[1].text is not None
    assert turns[1].text.endswith(" [shares a photo: a photo of a red kayak]")
    assert (turns[0].role, turns[0].speaker, turns[0].session) == ("user", "Ana", "1")
    assert (turns[1].role, turns[1].speaker) == ("assistant", "Ben")
    # a session opens at its date (1 May 2023, 13:00 UTC; the second a day later), its
    # turns 10 s apart
    may_1 = 1682946000000
    assert turns[0].at == may_1 and turns[14].at == may_1 + 14 * 10_000
    assert turns[15].at == may_1 + 86_400_000 and turns[15].session == "2"


def test_a_list_of_samples_is_one_transcript_each(tmp_path: Path) -> None:
    sample = tiny_sample()
    listed = {"sample_id": "conv-9", "qa": sample.pop("qa"), "conversation": sample}
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([listed, {**listed, "sample_id": "conv-10"}]))
    first, second = read_locomo(path)
    assert (first.source, second.source) == (f"{path}:conv-9", f"{path}:conv-10")
    (alone,) = read_locomo(_written(tmp_path, tiny_sample()))
    assert first.events == alone.events and first.questions == alone.questions


def test_a_third_speaker_and_a_repeated_turn_id_are_counted(tmp_path: Path) -> None:
    sample = tiny_sample()
    sample["session_1"].insert(2, {"speaker": "Cy", "dia_id": "D1:99", "text": "hi all"})
    sample["session_2"][3]["dia_id"] = "D2:03"  # the same turn as D2:3 once fixed
    (t,) = read_locomo(_written(tmp_path, sample))
    notes = dict(t.notes)
    assert notes["turns of a third speaker (dropped)"] == 1
    assert notes["repeated turn ids (renamed)"] == 1
    assert t.turns == 30 and "D1:99" not in {e.id for e in t.events}


@pytest.mark.parametrize(
    "content",
    ["not json", json.dumps({"question": "q"}), json.dumps([{"speaker_a": "A"}, 3])],
)
def test_a_file_not_in_locomo_format_is_refused(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(BadTranscript, match=r"bad\.json"):
        read_locomo(path)


def test_auc_by_hand() -> None:
    # pairs (evidence, other): (3, 3) a tie, (3, 1), (7, 3), (7, 1): 3.5 of 4
    assert auc([3.0, 7.0], [3.0, 1.0]) == 0.875
    assert auc([1.0], [2.0]) == 0.0 and auc([2.0], [2.0]) == 0.5


def test_labeler_quality_counts_each_importance() -> None:
    turns = [MemoryTurn(f"t{i}", x, i) for i, x in enumerate([7.0, 3.0, 3.0, 1.0, 7.0])]
    t = Transcript(tuple(turns), "x", (Question("q", ("t0", "t1")), Question("r", ("t0",))))
    q = labeler_quality(t)
    assert q is not None and (q.turns, q.evidence) == (5, 2)
    assert q.by_importance == (("7 business", 2, 1), ("3 context", 2, 1), ("1 chitchat", 1, 0))
    # importances the rules never give are rows by value; past 12 values, by 0.1
    odd = [MemoryTurn(f"t{i}", x, i) for i, x in enumerate([9.0, 6.0, 6.0])]
    other = labeler_quality(Transcript(tuple(odd), "x", (Question("q", ("t1",)),)))
    assert other is not None and other.by_importance == (("9", 1, 0), ("6", 2, 1))
    values = [3.01, 3.02, 3.03, 3.04, 3.11, 3.12, 3.13, 3.14, 3.21, 3.22, 3.23, 3.24, 3.31]
    many = [MemoryTurn(f"t{i}", x, i) for i, x in enumerate(values)]
    other = labeler_quality(Transcript(tuple(many), "x", (Question("q", ("t0",)),)))
    assert other is not None
    assert other.by_importance == (("3.3", 1, 0), ("3.2", 4, 0), ("3.1", 4, 0), ("3", 4, 1))
    # evidence 7 and 3 against 3, 1, 7: (7 vs 3, 1: 2; vs 7: .5) + (3 vs 3: .5, 1: 1)
    assert q.auc == pytest.approx(4.0 / 6)
    assert labeler_quality(Transcript(tuple(turns), "x")) is None


def test_simulate_reads_a_locomo_file_and_reports_the_labeler(
    server: Server, tmp_path: Path
) -> None:
    path = _written(tmp_path, tiny_sample())
    args = ["--transcript", str(path), "--label", "rules", "--window", "10"]
    result = CliRunner().invoke(main, ["--url", server.url, "simulate", *args])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "30 turns" in out and "3 questions" in out and "2 sessions" in out
    assert "read: evidence ids naming no turn (dropped): 2" in out
    assert "Importance against the questions' evidence: AUC " in out
    result = CliRunner().invoke(main, ["--url", server.url, "simulate", *args, "--json"])
    report = json.loads(result.output)
    labeler = report["transcript"]["labeler"]
    assert (labeler["turns"], labeler["evidence"]) == (30, 5)
    assert sum(row["turns"] for row in labeler["by_importance"]) == 30
    assert report["transcript"]["notes"]["evidence ids naming no turn (dropped)"] == 2
    assert report["policies"]["fifo"]["questions"] == 3
    # a directory holds *.json as well as *.jsonl
    result = CliRunner().invoke(
        main, ["--url", server.url, "simulate", "--transcript", str(tmp_path), "--label", "rules"]
    )
    assert result.exit_code == 0 and "1 transcripts" not in result.output, result.output


def _written(tmp_path: Path, sample: dict[str, object]) -> Path:
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(sample))
    return path
