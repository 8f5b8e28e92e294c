"""docs/benchmarks.md says how to reproduce what it shows (issue 35): every table names the script
that produced it, the Reproduce section has a command for every benchmark ``make bench`` runs, and
``bench/run_all.py`` writes each copied table with its command."""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "benchmarks.md"
_SCRIPT = re.compile(r"bench/[\w/.-]+\.py|bench_\w+\.py|bench\.bench_\w+")
# a heading, or a paragraph opening in bold or italics (the sub-headings of the long sections)
_PART = re.compile(r"#+ |\*\*?[A-Z]")


def _tables(text: str) -> list[tuple[str, str]]:
    """(header row, text since the heading or bold/italic paragraph opening the part it is in, up to
    its end) of every table in ``text``."""
    out, since, lines = [], [], text.splitlines()
    for i, line in enumerate(lines):
        since.append(line)
        if _PART.match(line):
            since = [line]
        elif re.fullmatch(r"\|[-:| ]+\|", line):
            end = i
            while end + 1 < len(lines) and lines[end + 1].startswith("|"):
                end += 1
            out.append((lines[i - 1], "\n".join(since + lines[i + 1 : end + 1])))
    return out


def test_every_table_names_the_script_that_produced_it() -> None:
    tables = _tables(DOC.read_text(encoding="utf-8"))
    assert len(tables) > 30
    unnamed = [header[:80] for header, text in tables if not _SCRIPT.search(text)]
    assert unnamed == []


def test_the_reproduce_section_has_a_command_for_every_benchmark() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert "\n## Reproduce\n" in text
    reproduce = text.split("\n## Reproduce\n", 1)[1]
    missing = [
        p.name for p in sorted((REPO / "bench").glob("bench_*.py")) if f"bench/{p.name}" not in reproduce
    ]
    assert missing == []


def test_run_all_copies_a_table_under_its_heading_with_its_command() -> None:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import run_all
    finally:
        sys.path.remove(str(REPO / "bench"))
    table = "### Latency\n\n| a | b |\n|---|---|\n| 1 | 2 |"
    out = run_all.with_command(table, "query_latency")
    head, blank, command, *rest = out.splitlines()
    assert (head, blank) == ("### Latency", "")
    assert command.startswith("Command: `python bench/bench_query_latency.py`")
    assert "`bench/results/query_latency.md`" in command
    assert rest == ["", "| a | b |", "|---|---|", "| 1 | 2 |"]
    page = "# Conversations\n\nintro\n\n| s | n |\n|---|---|\n\n## dev: turns missed (3)\n\n- a miss"
    out = run_all.with_command(page, "conversations")
    assert out.startswith("### Conversations\n\nCommand: `python bench/bench_conversations.py`")
    assert "| s | n |" in out
    assert "turns missed" not in out and "a miss" not in out
    assert "misses) in that file" in out
