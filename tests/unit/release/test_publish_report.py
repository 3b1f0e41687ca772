"""What a publish that did not reach every endpoint tells the user to run: a release is finished
by `release` with its options (found on the stack: `publish` alone, as the message said, left the
endpoint it finished without the VEX, and the record without the gate's result)."""

from __future__ import annotations

from xpu_release.release.model.record import EndpointRecord, ReleaseRecord
from xpu_release.release.publishing.publish import failure_report


def _half_published() -> ReleaseRecord:
    def endpoint(name: str, status: str, error: str | None) -> EndpointRecord:
        return EndpointRecord(endpoint=name, host="127.0.0.1:1", version_ref=f"{name}/demo:1.0",
                              floating_refs=(), status=status, digest=None, error=error)  # type: ignore[arg-type]  # fmt: skip

    return ReleaseRecord(ref="demo:1.0", manifest="manifests/demo/1.0.yaml", manifest_sha256="0" * 64,
                         inputs_sha256="0" * 64, tested_image_id="sha256:" + "1" * 64, digest=None,
                         published_at="2026-12-05T00:00:00Z", complete=False, floating_moved=(),
                         endpoints=(endpoint("public", "staged", None),
                                    endpoint("vpc/cn-shanghai", "failed", "connection refused")))  # fmt: skip


def test_a_release_is_finished_by_release_with_its_options() -> None:
    said = failure_report(_half_published(), rerun="release")

    assert "rerun `xpu-release release demo:1.0` with the same options (--advisories" in said
    assert "xpu-release publish" not in said
    assert "vpc/cn-shanghai" in said
    assert "connection refused" in said


def test_a_bare_publish_is_finished_by_publish() -> None:
    assert "rerun `xpu-release publish demo:1.0` to finish" in failure_report(_half_published())
