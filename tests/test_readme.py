"""Every Python block of the README and of docs/ runs, as written, against a test server.

Each block connects where REDIS_URL points (as the blocks say), so the test
runs it in a fresh interpreter with REDIS_URL set to its own server. The
`memevict simulate` block runs here too, each line as written, with the files
it names made from the README's example transcript; the other shell blocks run
elsewhere: the redis-cli block in tests/test_cli.py, the two quick-start
commands by CI itself. Every link between them resolves.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from memevict import MemoryStore
from memevict.importance import CATEGORIES
from tests import docs
from tests.conftest import fresh_client
from tests.locomo_fixture import tiny_sample
from tests.servers import Server, valkey_binary

PYTHON = docs.blocks("python")


@pytest.fixture(scope="module")
def docs_server() -> Iterator[Server]:
    """The server the docs' code runs on: Valkey, once. The docs show the API, which the
    rest of the suite runs on both servers; running their blocks twice adds a minute to
    CI and finds nothing new."""
    started = Server(valkey_binary()).start()
    yield started
    started.stop()


@pytest.fixture
def docs_client(docs_server: Server) -> Iterator[redis.Redis]:
    yield from fresh_client(docs_server)


def test_the_docs_have_the_python_blocks_this_test_knows() -> None:
    # a block added later is run too; this guards against the pattern missing all
    assert len(PYTHON) >= 4
    assert {name for name, _ in PYTHON} >= {"README.md"}


@pytest.mark.parametrize(
    "index", range(len(PYTHON)), ids=[f"{name}-{i}" for i, (name, _) in enumerate(PYTHON)]
)
def test_every_python_block_runs_as_written(
    docs_server: Server, docs_client: redis.Redis, index: int, tmp_path: Path
) -> None:
    block = PYTHON[index][1]
    done = subprocess.run(
        [sys.executable, "-c", block],
        # (a block on the embedded server keeps its data in a directory of the test's own)
        env={**os.environ, "REDIS_URL": docs_server.url, "MEMEVICT_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    if "importance_of(rules, message)" in block:  # the labeler block stored its message
        memory = MemoryStore(docs_client, "agent-42").get("m-17")
        assert memory is not None and memory.importance == CATEGORIES["instruction"]
    if "agent_session(store, n)" in block:  # 1,000 sessions through the documented pool
        stats = MemoryStore(docs_client, "agent-42").stats()
        assert stats.hot + stats.cold == 1000  # every session's memory landed


def test_the_readme_acl_line_is_the_one_memevict_prints() -> None:
    from memevict.acl import acl_setuser_line

    shown = [
        line.strip()
        for line in docs.text().splitlines()
        if line.strip().startswith("ACL SETUSER agent42 ")
    ]
    assert shown == [acl_setuser_line("agent42", "agent-42", "PASSWORD")]


def run_line(
    line: str, server: Server, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """A documented `memevict ...` shell line, run as written (this venv's memevict) with
    REDIS_URL at ``server``; it must succeed."""
    memevict = str(Path(sys.executable).with_name("memevict"))
    done = subprocess.run(
        line.replace("memevict", memevict, 1),
        shell=True,
        cwd=cwd,
        env={**os.environ, "REDIS_URL": server.url},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (line, done.stderr[-3000:])
    return done


def simulate_lines() -> list[str]:
    """Every line of every sh block that runs only `memevict simulate`."""
    lines = []
    for _, block in docs.blocks("sh"):
        code = [line.split("#", 1)[0].strip() for line in block.splitlines()]
        code = [line for line in code if line]
        if code and all(line.startswith("memevict simulate") for line in code):
            lines += code
    return lines


def test_the_simulate_blocks_are_the_ones_this_test_knows() -> None:
    assert len(simulate_lines()) >= 6


def test_every_simulate_line_runs_as_written(
    docs_server: Server, docs_client: redis.Redis, tmp_path: Path
) -> None:
    transcript = docs.blocks("jsonl")[0][1]
    (tmp_path / "my-agent.jsonl").write_text(transcript, encoding="utf-8")
    (tmp_path / "logs").mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / "logs" / name).write_text(transcript, encoding="utf-8")
    sample = tiny_sample()  # locomo10.json's shape: a list of samples
    listed = {"sample_id": "conv-1", "qa": sample.pop("qa"), "conversation": sample}
    (tmp_path / "locomo10.json").write_text(json.dumps([listed]), encoding="utf-8")
    for line in dict.fromkeys(simulate_lines()):  # (a line in two places runs once)
        done = run_line(line, docs_server, cwd=tmp_path)
        assert "memevict" in done.stdout, line  # every run reports memevict's window
        if "--json" in line:
            json.loads(done.stdout)
        if "--plot" in line:
            assert (tmp_path / "retention.png").stat().st_size > 0


def cli_lines() -> list[str]:
    """Every line of the sh blocks that run the CLI on a server (not simulate, not demo)."""
    lines = []
    for _, block in docs.blocks("sh"):
        code = [line.strip() for line in block.splitlines() if line.strip()]
        if code and all(re.match(r"memevict -n \S+ \w", line) for line in code):
            lines += code
    return lines


def test_every_cli_line_runs_as_written(docs_server: Server, docs_client: redis.Redis) -> None:
    lines = cli_lines()
    assert len(lines) >= 3  # (the README's CLI block: the pattern found it)
    outputs = [run_line(line, docs_server).stdout for line in lines]
    assert any("vault path" in out for out in outputs)  # the window shows what was remembered


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a markdown file."""
    seen: dict[str, int] = {}
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        fenced ^= line.lstrip().startswith("```")
        heading = None if fenced else re.match(r"#{1,6} (.+)", line)
        if heading is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading[1].strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        seen.setdefault(f"{slug}-{n}" if n else slug, 1)
    return set(seen)


def test_every_link_between_the_docs_resolves() -> None:
    checked = 0
    results = docs.ROOT / "benchmarks" / "RESULTS.md"
    for path in [*docs.files(), results]:
        for target in LINK.findall(path.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):  # (https:, mailto:)
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            assert linked.exists(), f"{path.name}: {target}"
            if anchor and linked.suffix == ".md":
                assert anchor in anchors(linked), f"{path.name}: {target}"
            checked += 1
    assert checked > 0


def test_the_readme_leads_to_every_reference_file() -> None:
    readme = (docs.ROOT / "README.md").read_text(encoding="utf-8")
    linked = {target.partition("#")[0] for target in LINK.findall(readme)}
    assert {f"docs/{path.name}" for path in docs.files()[1:]} <= linked
