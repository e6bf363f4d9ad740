"""benchmarks/adapter_turn.py: a tiny run (a few turns, one round) on a server of its own of
the test server's binary, the base revision's adapters against the working tree's, and
RedisSession. No timing is asserted: the shape of the output is."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.servers import Server
from tests.test_bench import run_benchmark

ROOT = Path(__file__).resolve().parent.parent
BASE = "b130e70"  # the script's default base
FLOWS = {"openai", "openai-runner", "langchain", "pydantic-ai"}
PEER_FLOWS = {"openai", "openai-runner"}  # RedisSession's


def _has(rev: str) -> bool:
    found = subprocess.run(["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=ROOT, check=False)
    return found.returncode == 0


@pytest.mark.skipif(not _has(BASE), reason=f"{BASE} is not in this clone")
def test_the_adapter_turn_script_runs(server: Server, tmp_path: Path) -> None:
    out_json = tmp_path / "turn.json"
    args = ["--turns", "3", "--warm", "20", "--rounds", "1", "--json", str(out_json)]
    out = run_benchmark(server, ["adapter_turn.py", "URL", *args])
    data = json.loads(out_json.read_text())
    assert data["base"] == BASE and data["rounds"] == 1 and data["turns"] == 3, data
    assert set(data["flows"]) == FLOWS, data
    for flow, entry in data["flows"].items():
        sides = {"base", "HEAD", *({"RedisSession"} if flow in PEER_FLOWS else set())}
        assert sides <= set(entry), (flow, entry)
        for side in sides:
            e = entry[side]
            assert e["us"] > 0 and e["server_us"] > 0 and e["sent"] > 0, (flow, side, e)
            assert e["trips"] >= 2 and e["trips"] == int(e["trips"]), (flow, side, e)
            # every turn sends the same commands: their count per turn is whole
            assert e["cmds"] >= e["trips"] and e["cmds"] == int(e["cmds"]), (flow, side, e)
        assert entry["ratio_us"] > 0 and entry["ratio_server_us"] > 0, (flow, entry)
    for flow in PEER_FLOWS:
        entry = data["flows"][flow]
        assert entry["base_vs_RedisSession"] > 0 and entry["HEAD_vs_RedisSession"] > 0, entry
        # memevict sends one script call a trip; RedisSession pipelines its transaction
        for side in ("base", "HEAD"):
            assert entry[side]["cmds"] == entry[side]["trips"], (flow, side, entry)
        assert entry["RedisSession"]["cmds"] > entry["RedisSession"]["trips"], entry
    for side in ("base", "HEAD", "RedisSession"):  # the Runner's second add_items: a trip more
        runner, one = data["flows"]["openai-runner"][side], data["flows"]["openai"][side]
        assert runner["trips"] > one["trips"], (side, data["flows"])
    # the commands counted on the server are those the client sent
    assert "commands counted differ" not in out, out
    rows = re.findall(r"^([a-z-]+) +(base|HEAD|RedisSession) +\d+ +\d+ +\d+\.\d\d ", out, re.M)
    assert len(rows) == 2 * len(FLOWS) + len(PEER_FLOWS), out
    assert {flow for flow, _ in rows} == FLOWS, out
