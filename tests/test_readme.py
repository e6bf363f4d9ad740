"""Every Python block of the README runs, as written, against a test server.

Each block connects where REDIS_URL points (as the blocks say), so the test
runs it in a fresh interpreter with REDIS_URL set to its own server. The
`memevict simulate` block runs here too, each line as written, with the files
it names made from the README's example transcript; the other shell blocks run
elsewhere: the redis-cli block in tests/test_cli.py, the two quick-start
commands by CI itself.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import redis

from memevict import MemoryStore
from memevict.importance import CATEGORIES
from tests.locomo_fixture import tiny_sample
from tests.servers import Server

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", text, re.S | re.M)
    return [textwrap.dedent(body) for _, body in blocks]


def test_the_readme_has_the_python_blocks_this_test_knows() -> None:
    # a block added later is run too; this guards against the pattern missing all
    assert len(python_blocks()) >= 4


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_every_python_block_runs_as_written(
    server: Server, client: redis.Redis, index: int
) -> None:
    block = python_blocks()[index]
    done = subprocess.run(
        [sys.executable, "-c", block],
        env={**os.environ, "REDIS_URL": server.url},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    if "importance_of(rules, message)" in block:  # the labeler block stored its message
        memory = MemoryStore(client, "agent-42").get("m-17")
        assert memory is not None and memory.importance == CATEGORIES["instruction"]
    if "agent_session(store, n)" in block:  # 1,000 sessions through the documented pool
        stats = MemoryStore(client, "agent-42").stats()
        assert stats.hot + stats.cold == 1000  # every session's memory landed


def test_the_readme_acl_line_is_the_one_memevict_prints() -> None:
    from memevict.acl import acl_setuser_line

    shown = [
        line.strip()
        for line in README.read_text(encoding="utf-8").splitlines()
        if line.strip().startswith("ACL SETUSER agent42 ")
    ]
    assert shown == [acl_setuser_line("agent42", "agent-42", "PASSWORD")]


def simulate_lines() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Choosing settings by evidence", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_the_simulate_block_is_the_one_this_test_knows() -> None:
    lines = simulate_lines()
    assert len(lines) >= 6 and all(line.startswith("memevict simulate") for line in lines)


def test_every_simulate_line_runs_as_written(server: Server, tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    transcript = text.split("```jsonl\n", 1)[1].split("```", 1)[0]
    (tmp_path / "my-agent.jsonl").write_text(transcript, encoding="utf-8")
    (tmp_path / "logs").mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / "logs" / name).write_text(transcript, encoding="utf-8")
    sample = tiny_sample()  # locomo10.json's shape: a list of samples
    listed = {"sample_id": "conv-1", "qa": sample.pop("qa"), "conversation": sample}
    (tmp_path / "locomo10.json").write_text(json.dumps([listed]), encoding="utf-8")
    memevict = str(Path(sys.executable).with_name("memevict"))
    for line in simulate_lines():
        done = subprocess.run(
            line.replace("memevict", memevict, 1),
            shell=True,
            cwd=tmp_path,
            env={**os.environ, "REDIS_URL": server.url},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, (line, done.stderr[-3000:])
        assert "memevict" in done.stdout, line  # every run reports memevict's window
        if "--json" in line:
            json.loads(done.stdout)
        if "--plot" in line:
            assert (tmp_path / "retention.png").stat().st_size > 0
