"""The documentation the tests check: README.md and every docs/*.md, read as one text
where a test looks for a block (wherever it lives), or file by file for the links."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def text() -> str:
    """Every documentation file, one after another."""
    return "\n".join(path.read_text(encoding="utf-8") for path in files())


def blocks(language: str) -> list[tuple[str, str]]:
    """(file name, code) of each ```language block, dedented, in file order."""
    found = []
    for path in files():
        body = path.read_text(encoding="utf-8")
        for _, code in re.findall(rf"^( *)```{language}\n(.*?)^\1```", body, re.S | re.M):
            found.append((path.name, textwrap.dedent(code)))
    return found
