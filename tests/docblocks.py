"""The code blocks of README.md and docs/: which run, and how (the marker convention).

Every fenced block in README.md and docs/**/*.md is preceded (on the line before its fence)
by one HTML comment, invisible on GitHub, that says what the block is:

``<!-- test: file NAME -->``
    the block is a file the reader writes: the test saves it verbatim as NAME;
``<!-- test: run -->``
    commands (or, for a ``python`` block, a script) the reader runs: the test runs them
    verbatim, in order, in one scratch directory per document (``bash -e``; each must exit 0);
``<!-- test: stdout -->``
    exactly what the ``run`` block before it prints on stdout: the test compares;
``<!-- test: output -->``
    what a command prints, or a layout, a listing, a diagram: not code;
``<!-- test: skip REASON -->``
    code that cannot run here as it is (a real cluster, Spark, a fragment of a class): the
    reason is required and says why and, where one exists, which test covers it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[1]
MARKER = re.compile(r"^<!-- test: (file|run|stdout|output|skip)(?: (.+?))? -->$")


@dataclass(frozen=True)
class Block:
    """One fenced block: its document, line, info string, marker and verbatim text."""

    doc: Path
    line: int
    info: str
    kind: str | None
    arg: str | None
    text: str

    @property
    def where(self) -> str:
        """``docs/x.md:12`` for messages."""
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def documents() -> list[Path]:
    """README.md and every Markdown file under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(doc: Path) -> list[Block]:
    """The fenced blocks of ``doc`` in order, each with the marker on the line before it."""
    lines = doc.read_text(encoding="utf-8").split("\n")
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^(```+)(.*)$", lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith(fence.group(1)))
        marker = MARKER.match(lines[i - 1].strip()) if i else None
        kind, arg = (marker.group(1), marker.group(2)) if marker else (None, None)
        text = "\n".join(lines[i + 1 : end]) + "\n"
        found.append(Block(doc, i + 1, fence.group(2).strip(), kind, arg, text))
        i = end + 1
    return found


def marker_problems(block: Block) -> list[str]:
    """What is wrong with a block's marker (nothing for a well-marked block)."""
    if block.kind is None:
        return [f"{block.where}: no <!-- test: KIND --> marker (file, run, stdout, output, skip) before it"]
    if block.kind in ("file", "skip") and not block.arg:
        what = "a file name" if block.kind == "file" else "a reason"
        return [f"{block.where}: '{block.kind}' needs {what}"]
    if block.kind == "run" and block.info not in ("", "sh", "bash", "shell", "python"):
        return [f"{block.where}: a '{block.info}' block cannot run; mark it file, output or skip"]
    return []
