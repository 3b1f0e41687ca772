"""Found by review (issue 41): the notes' evaluation tables quote the workload's own words (a
variant it cannot run: ``{"unsupported": "<why>"}``, outside data) in Markdown table cells
without escaping them: a '|' in the reason splits the cell and shifts every column after it, in
the notes published beside the image. The project's rule for a Markdown cell (cli/markdown.py
``cell``): one line, pipes escaped."""

from __future__ import annotations

import re
from pathlib import Path

from xpu_release.image.bounded import Finished, Limits

from ..release.test_evaluate import IDS, REF, Fake, evaluated, notes_of

WHY = "needs gcc | clang, neither is here"


class SaysWhyWithAPipe(Fake):
    def run_bounded(self, image: str, argv: list[str], *, env: dict[str, str], purpose: str,
                    limits: Limits, timeout: float, arm: str = "") -> Finished:  # fmt: skip
        if env.get("XPU_BENCH_COMPILE"):
            return Finished(exit_code=0, stdout=b'{"unsupported": "' + WHY.encode() + b'"}\n', stderr="")
        return super().run_bounded(image, argv, env=env, purpose=purpose, limits=limits, timeout=timeout)


def cells(row: str) -> int:
    """The cells of a Markdown table row: split at '|' not escaped as '\\|'."""
    return len(re.split(r"(?<!\\)\|", row.strip().strip("|")))


def test_a_workloads_reason_with_a_pipe_keeps_the_notes_tables_whole(repo: Path) -> None:
    fake = SaysWhyWithAPipe(speed={IDS["this"]: 1000.0, IDS["base"]: 1000.0})
    got = evaluated(repo, REF, fake, "base")
    assert got is not None
    for lang in ("en", "zh"):
        notes = notes_of(repo, REF, got.entry, lang)
        section = notes[notes.index("\n### ") :]
        tables: list[list[str]] = []
        for text in section.split("\n"):
            if text.startswith("|"):
                if not tables or not tables[-1]:
                    tables.append([])
                tables[-1].append(text)
            elif tables and tables[-1]:
                tables.append([])
        tables = [t for t in tables if t]
        assert tables, notes
        assert any("gcc" in row for t in tables for row in t)  # the reason is reported...
        for table in tables:
            header = cells(table[0])
            for row in table[2:]:
                assert cells(row) == header, f"{lang}: {row!r} has not the {header} cells of {table[0]!r}"
