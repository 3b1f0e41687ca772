"""A source layout whose index.json lists what its blobs do not hold. outside-data.md: "mirror
reads and checks everything it copies ... a damaged source (exit 12 for a layout ...)";
exit-codes.md: 12 is "a damaged file", 11 "not found: an image, version, manifest or record".

A layout whose index.json names the version but whose manifest blob is gone is told as a layout
that "serves nothing at 25.03: is 25.03 the version it holds? (check --from)" (exit 11), which
sends the user to check a name that is right; a layer blob that is gone, or a FIFO in its place,
is exit 11 too, while the message itself says "copy the layout again" (damage)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ..cli.hostile import REF, a_users_error, invoke, layout, release_fifos


@pytest.mark.parametrize("what", ["image", "layer"])
@pytest.mark.parametrize("how", ["removed", "a FIFO"])
def test_a_blob_the_index_lists_but_the_layout_lacks_is_damage(
    repo: Path, tmp_path: Path, what: str, how: str
) -> None:
    source = tmp_path / "source"
    blob = layout(source)[what]
    blob.unlink()
    if how == "a FIFO":
        os.mkfifo(blob)

    argv = ["mirror", REF, "--from", f"oci:{source}", "--to", f"oci:{tmp_path / 'target'}"]
    cache = {"XPU_RELEASE_CACHE": str(tmp_path / "cache")}
    result = invoke(repo, argv, env=cache, unstick=release_fifos(source))

    a_users_error(result, 12)  # today: 11
    assert "check --from" not in result.stderr, result.stderr
    assert not (tmp_path / "target").exists()


def test_a_layer_whose_bytes_are_damaged_leaves_the_target_as_it_was(repo: Path, tmp_path: Path) -> None:
    # outside-data.md: "mirror reads and checks everything it copies (image, referrers, cosign's
    # .att) before it writes anything: a damaged source (exit 12 for a layout, 7 for a registry)
    # leaves the target as it was." A layer's bytes are checked only as they are copied, after
    # the target layout was made and the config blob put in it.
    source, target = tmp_path / "source", tmp_path / "target"
    layer = layout(source)["layer"]
    layer.write_bytes(layer.read_bytes().upper())  # its size, not its digest

    result = invoke(repo, ["mirror", REF, "--from", f"oci:{source}", "--to", f"oci:{target}"],
                    env={"XPU_RELEASE_CACHE": str(tmp_path / "cache")})  # fmt: skip

    a_users_error(result, 12)
    assert not target.exists(), sorted(str(p.relative_to(target)) for p in target.rglob("*"))
