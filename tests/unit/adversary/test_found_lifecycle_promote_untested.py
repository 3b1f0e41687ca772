"""``promote`` copies "the very same bytes" that were released to staging; its gate check reads
the release record, but only when the record's digest is the one staging serves. When staging's
version tag serves another image than the one the record says was built, smoke-tested, gated and
published (version tags are immutable: someone overwrote it at staging), promote copied that
other, untested image to production, moved ``latest`` onto it, exited 0, and replaced the
record's digest with it (the evidence of what was tested is gone).

A promote whose staging image is not the recorded release must be refused, nothing copied, the
record kept."""

from __future__ import annotations

from pathlib import Path

from xpu_release.release.model.record import read

from ..release.line import publish, recorded
from .lifecycle_kit import promote, two_channels

TESTED = "sha256:" + "cd" * 32  # the image the release record says was tested and published


def test_promote_refuses_an_image_at_staging_that_is_not_the_recorded_release(
    repo: Path, tmp_path: Path
) -> None:
    with two_channels(repo, tmp_path, ["1.0", "1.1"]) as (staging, prod):
        digests = publish(staging, ["1.0", "1.1"], tmp_path / "spool").digests  # 1.1: not TESTED
        path = recorded(staging, "1.1", TESTED)

        result = promote(staging, prod)

        copied = [prod.client(ep).head_manifest(prod.repo(ep), digests["1.1"]) for ep in prod.endpoints()]
        latest = set(prod.served("latest").values())

    assert result.exit_code not in (0, 70), result.stdout
    assert TESTED in result.stderr
    assert copied == [None, None, None]
    assert latest == {None}
    assert read(path).digest == TESTED
    assert read(path).promotions == ()
