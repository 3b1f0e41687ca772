"""A cache a runner shares holds what others put there: names that are not UTF-8, trees deeper
than any walk should go, advisory indexes. ``cache du`` and ``cache prune`` count and say it all,
and their ``--json`` is valid UTF-8 whatever the names."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from xpu_release.cli import cli
from xpu_release.guard.limits import MAX_FOLDER_DEPTH

from ..guard.hostile import chain


def run(repo: Path, cache: Path, *args: str) -> object:
    return CliRunner().invoke(
        cli, ["--root", str(repo), *args], env={"XPU_RELEASE_CACHE": str(cache)}, catch_exceptions=False
    )


def test_prune_json_writes_a_name_that_is_not_utf8_as_escapes(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (cache / "oci-blobs").mkdir(parents=True)
    odd = os.fsencode(cache / "oci-blobs") + b"/sha256-\xff\xfe.partial"
    Path(os.fsdecode(odd)).write_bytes(b"x")

    result = run(repo, cache, "cache", "prune", "--dry-run", "--json")

    out = result.stdout_bytes  # type: ignore[attr-defined]
    out.decode("utf-8")  # valid UTF-8: a strict decoder reads it
    (removed,) = json.loads(out)["removed"]
    assert removed.endswith("sha256-\\xff\\xfe.partial")


def test_an_entry_deeper_than_a_prune_walks_is_removed_as_far_as_it_goes_and_named(
    repo: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    chain(cache / "contexts" / "deep-1.0", MAX_FOLDER_DEPTH + 3)
    (cache / "contexts" / "deep-1.0" / "Dockerfile").write_text("FROM x\n")

    du = run(repo, cache, "cache", "du", "--json")
    result = run(repo, cache, "cache", "prune", "--keep-storage", "0", "--json")

    assert json.loads(du.stdout)["skipped_folders"] == 1  # type: ignore[attr-defined]
    assert result.exit_code == 0  # type: ignore[attr-defined]
    data = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert data["stayed"] == [str(cache / "contexts" / "deep-1.0")]
    assert "not removed whole" in result.stderr  # type: ignore[attr-defined]
    assert not (cache / "contexts" / "deep-1.0" / "Dockerfile").exists()  # what could go, went
    for level in range(MAX_FOLDER_DEPTH + 3, 0, -1):  # the rest, by hand (as the message says)
        (cache / "contexts" / "deep-1.0").joinpath(*["a"] * level).rmdir()


def test_an_advisory_index_is_an_entry_du_counts_and_prune_removes(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (cache / "advisories").mkdir(parents=True)
    (cache / "advisories" / ("0" * 64 + ".v2.sqlite")).write_bytes(b"x" * 5000)

    du = json.loads(run(repo, cache, "cache", "du", "--json").stdout)  # type: ignore[attr-defined]
    run(repo, cache, "cache", "prune", "--keep-storage", "0")

    assert {k["kind"]: (k["entries"], k["bytes"]) for k in du["kinds"]}["advisories"] == (1, 5000)
    assert du["facts_bytes"] == 0  # not a fact: made again from its archive
    assert list((cache / "advisories").iterdir()) == []
