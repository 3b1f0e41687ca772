"""A target layout's file under a blob's name that is far larger than the blob. ``Layout.proven``
hashes the whole file (``writing.landed``) and only then compares its size with the size the
manifest lists: a sparse file of 16 GB (no disk used) under the name of an 11-byte layer costs
40 s of hashing, one of 1 TB some 40 minutes, before it is found not to be the blob and
replaced. mirrors.md: "a blob the target holds is skipped only once proven: hashed in a layout";
never a hang."""

from __future__ import annotations

from pathlib import Path

from ..cli.hostile import REF, layout
from .proc import a_users_error_of, run_cli


def test_a_huge_file_under_a_small_blobs_name_is_not_hashed_to_its_end(repo: Path, tmp_path: Path) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    layer = layout(source)["layer"]
    (target / "blobs" / "sha256").mkdir(parents=True)
    (target / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (target / "index.json").write_text('{"schemaVersion": 2, "manifests": []}')
    with (target / "blobs" / "sha256" / layer.name).open("wb") as f:
        f.truncate(64 << 30)  # sparse: 64 GB of nothing where an 11-byte layer belongs

    ran = run_cli(repo, ["mirror", REF, "--from", f"oci:{source}", "--to", f"oci:{target}"], deadline=15)

    a_users_error_of(ran, 0)  # today: still hashing at 15 s (some 3 minutes in all)
    assert (target / "blobs" / "sha256" / layer.name).read_bytes() == layer.read_bytes()
