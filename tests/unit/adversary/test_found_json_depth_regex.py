"""``guard.reading.depth_of`` measures a JSON text's nesting before parsing it, skipping strings
with ``re.sub(rb'"[^"\\\\]*(?:\\\\.[^"\\\\]*)*"', …)``. A string that never closes fails to match
at its quote, and the search starts again at the next quote: on ``"\\"\\"\\"…`` (every quote
escaped, none closing) each of the n quotes scans to the end, O(n²). 80 KB take ~15-30 s, the
4 MiB a manifest may be some 20 hours, the 64 MiB of an index.json weeks: every reader of outside
JSON (a registry's manifest or referrers answer, a layout's index.json, an advisory, a record, a
token answer) hangs on one small document. outside-data.md: never a hang."""

from __future__ import annotations

import time
from pathlib import Path

from xpu_release.guard.reading import depth_of

from ..cli.hostile import REF, layout
from .proc import a_users_error_of, run_cli

UNCLOSED = b'"' + b'\\"' * 75_000  # 150 KB: one string, never closed


def test_measuring_the_depth_of_an_unclosed_string_is_linear() -> None:
    small = UNCLOSED[:30_001]  # 30 KB: a few seconds today, a millisecond if linear
    start = time.thread_time()  # (the regex holds the GIL: no thread's deadline could end it)
    depth_of(small)
    seconds = time.thread_time() - start  # CPU: a loaded machine's waits are not depth_of's

    assert seconds < 0.5, f"depth_of spends {seconds:.1f} s on 30 KB: it is quadratic"


def test_an_advisory_of_150_kb_does_not_hang_the_scan(repo: Path, tmp_path: Path) -> None:
    osv = tmp_path / "osv"
    osv.mkdir()
    (osv / "a.json").write_bytes(UNCLOSED)

    ran = run_cli(repo, ["scan", REF, "--advisories", str(osv)], deadline=20, no_engine=True)

    a_users_error_of(ran)  # today: still running at 20 s (counted unreadable after some minutes)


def test_a_layout_index_of_150_kb_does_not_hang_the_mirror(repo: Path, tmp_path: Path) -> None:
    source = tmp_path / "source"
    layout(source)
    (source / "index.json").write_bytes(b'{"schemaVersion": 2, "x": ' + UNCLOSED + b"}")

    ran = run_cli(repo, ["mirror", REF, "--from", f"oci:{source}", "--to", f"oci:{tmp_path / 'target'}"],
                  deadline=20)  # fmt: skip

    a_users_error_of(ran, 12)  # the index is no JSON: exit 12 naming it, at once
