"""``cache prune`` on a cache of many entries. ``choose`` and ``prune`` ask ``e not in doomed`` of
a list, once per entry (and ``kept`` once more): O(n²) comparisons of dataclasses. 20,000 entries
(a runner's spool of layers and documents, its fetched wheels, over some months) take 80-100 s
to prune; the automatic cap (XPU_RELEASE_CACHE_MAX) runs the same after every publish.
runner-disk.md: "cache prune gives space back"; a prune holds the cache alone meanwhile, so every
other job on the runner waits for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from .proc import a_users_error_of, run_cli


@pytest.mark.parametrize(
    "rule", [["--keep-storage", "0"], ["--older-than", "0s"]], ids=["keep-storage", "older-than"]
)
def test_pruning_8000_entries_takes_seconds(repo: Path, tmp_path: Path, rule: list[str]) -> None:
    spool = tmp_path / "cache" / "oci-blobs"
    spool.mkdir(parents=True)
    for i in range(8000):
        (spool / f"sha256-{i:064x}").write_bytes(b"x")

    ran = run_cli(repo, ["cache", "prune", *rule, "--dry-run"], deadline=8)

    a_users_error_of(ran, 0)  # today: some 15 s (quadratic)
    assert "would remove 8000 entries" in ran.stderr + ran.stdout
