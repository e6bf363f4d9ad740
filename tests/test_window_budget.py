"""benchmarks/window_budget.py: a tiny run (300 memories) on a server of its own,
the installed lua/ against itself. No timing is asserted, only what the windows
returned."""

from __future__ import annotations

import re

from tests.servers import Server
from tests.test_bench import LUA, run_benchmark

MEMORIES = 300
LARGEST = 120  # the fill's most tokens per memory

ROW = re.compile(
    r"^  (\S.*?) +(\d[\d,]*) +(\d[\d,]*) +(\d+\.\d\d) +(\d+\.\d\d)  (within|over)$", re.M
)
COMPARED = re.compile(
    r"^  ([\d,]+ tokens) +A +([\d,]+) memories +([\d,]+) tokens .*"
    r"\| B / A paired (\d+\.\d+) \| replies: (.*)$",
    re.M,
)


def number(text: str) -> int:
    return int(text.replace(",", ""))


def test_the_window_budget_script_runs(server: Server) -> None:
    args = ["--memories", str(MEMORIES), "--rounds", "2", "--calls", "2", "--base", LUA]
    out = run_benchmark(server, ["window_budget.py", "URL", *args])
    rows = {name: row for name, *row in ROW.findall(out)}
    whole = re.search(r"^  whole tier \(([\d,]+) tokens\)", out, re.M)
    assert whole is not None, out
    total = number(whole.group(1))  # the hot tier's tokens
    assert MEMORIES * 10 <= total <= MEMORIES * LARGEST, out
    budgets = {"2,000 tokens": 2000, "8,000 tokens": 8000, "32,000 tokens": 32000}
    budgets |= {"128,000 tokens": 128000, f"whole tier ({total:,} tokens)": total}
    assert list(rows) == [*budgets, "no budget"], out
    for name, (memories, tokens, ms, slowest, _) in rows.items():
        assert float(slowest) >= float(ms) > 0, (name, out)
        budget = budgets.get(name, total)  # without one: every memory (fewer than 400)
        if budget >= total:  # everything fits: every memory is returned
            assert (number(memories), number(tokens)) == (MEMORIES, total), (name, out)
        else:  # filled to within the largest memory (300 candidates: none cut short)
            assert budget - LARGEST < number(tokens) <= budget, (name, out)
            assert 0 < number(memories) < MEMORIES, (name, out)
    assert number(rows["128,000 tokens"][0]) == MEMORIES
    # the same lua/ on both sides: the same windows, as the table of each says
    compared = COMPARED.findall(out)
    assert [c[0] for c in compared] == ["2,000 tokens", "8,000 tokens", "32,000 tokens"], out
    for name, memories, tokens, paired, replies in compared:
        assert replies == "the same" and float(paired) > 0, (name, out)
        assert (memories, tokens) == tuple(rows[name][:2]), (name, out)
    assert re.search(r"B / A paired \d+\.\d+$", out.strip()), out
