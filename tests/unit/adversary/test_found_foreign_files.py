"""Files another tool keeps in a layout. mirrors.md: a killed run's temporaries are swept from
the target (``writing.sweep``), and "fields and entries of index.json that another tool wrote
are kept". ``is_temporary`` takes every hidden name ending in ``.tmp`` for one of ours (ours are
``.<name>.<pid>-<8 hex>.tmp``): a file another tool or a person left there (``.notes.tmp``, an
upload of another client under ``blobs/sha256``) is deleted by the next mirror into the layout."""

from __future__ import annotations

import os
from pathlib import Path

from ..cli.hostile import REF, a_users_error, invoke, layout


def test_a_hidden_tmp_file_that_is_not_ours_survives_a_mirror_into_its_layout(
    repo: Path, tmp_path: Path
) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    layout(source)
    (target / "blobs" / "sha256").mkdir(parents=True)
    (target / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (target / "index.json").write_text('{"schemaVersion": 2, "manifests": []}')
    theirs = [target / ".notes.tmp", target / "blobs" / "sha256" / ".other-client-upload.tmp"]
    for path in theirs:
        path.write_text("not xpu-release's")
        os.utime(path, (0, 0))  # old: past the sweep's grace

    result = invoke(repo, ["mirror", REF, "--from", f"oci:{source}", "--to", f"oci:{target}"],
                    env={"XPU_RELEASE_CACHE": str(tmp_path / "cache")})  # fmt: skip

    a_users_error(result, 0)
    assert [p.name for p in theirs if not p.exists()] == []  # today: both deleted
