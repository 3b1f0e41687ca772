"""Session 14's adversary: reproductions against the line rule of 54e68c2 and its neighbours."""

from __future__ import annotations

import json
from pathlib import Path

from xpu_release.evidence.attachment import Attachment
from xpu_release.evidence.referrers import attach
from xpu_release.oci.registry import sha256_digest

from ..helpers import run, write_manifest
from ..release.line import IMAGE, LOGIN, PASSWORD, Channel, channel, image_of, manifests, moves, publish

PATCH_OF_11 = f'image: {IMAGE}\nversion: "1.1.1"\nextends: "1.1"\nrelease:\n  patch:\n    fixes: []\n'


def _at(ch: Channel, *args: str) -> int:
    done = run(ch.root, "--registries", str(ch.file), *args, *LOGIN, input=PASSWORD)
    assert done.exit_code == 0, done.stderr
    return done.exit_code


def _publish_at_public_only(ch: Channel, version: str, spool: Path) -> str:
    """``version`` as a publish that failed at both VPC regions leaves it: blobs, image, SBOM and
    version tag at the public endpoint alone; no floating tag moved (tags last)."""
    blobs, image = image_of(version)
    ep = next(e for e in ch.endpoints() if e.name == "public")
    client, repo = ch.client(ep), ch.repo(ep)
    spool.mkdir(parents=True, exist_ok=True)
    for data in blobs:
        path = spool / sha256_digest(data).replace(":", "-")
        path.write_bytes(data)
        client.upload_blob(repo, sha256_digest(data), path)
    client.put_manifest(repo, image.digest, image)
    sbom = Attachment(kind="sbom", payload=json.dumps({"bomFormat": "CycloneDX", "of": version}).encode())
    attach(client, repo, image, [sbom], created="2026-01-01T00:00:00Z", spool=spool)
    client.put_manifest(repo, version, image)
    return image.digest


def test_a_release_withdrawn_wherever_it_was_published_leaves_latest_to_the_newest_patch(
    repo: Path, tmp_path: Path
) -> None:
    # 1.2's publish failed at both VPC regions (published in part); it was then found bad and
    # withdrawn (withdraw passes the regions that do not hold it, exit 0). The patch 1.1.1 is
    # released everywhere: it is the newest release published and not withdrawn at every
    # endpoint, where withdraw/reinstate put latest (Steering._newest). The line rule counts 1.2
    # as "published in part" (_left: served_at and unserved) and gives 1.1.1 no latest, so latest
    # stays on 1.1, older, forever: no publish/promote of any release up to 1.2 ever moves it.
    manifests(repo, ["1.0", "1.1", "1.2"])
    write_manifest(repo, IMAGE, "1.1.1", PATCH_OF_11)
    with channel(repo, tmp_path, "production") as ch:
        digests = publish(ch, ["1.0", "1.1", "1.1.1"], tmp_path / "spool", latest=False).digests
        for ep in ch.endpoints():  # latest on 1.1, as the release of 1.1 left it
            ch.client(ep).put_manifest(ch.repo(ep), "latest", image_of("1.1")[1])
        _publish_at_public_only(ch, "1.2", tmp_path / "spool")
        _at(ch, "withdraw", f"{IMAGE}:1.2", "--reason", "bad")
        # withdraw's own rule, shown by a withdraw + reinstate of 1.1.1: latest goes to 1.1.1
        _at(ch, "withdraw", f"{IMAGE}:1.1.1", "--reason", "checking")
        _at(ch, "reinstate", f"{IMAGE}:1.1.1")
        steering_puts = set(ch.served("latest").values())
        rule = moves(ch, "1.1.1")

    assert steering_puts == {digests["1.1.1"]}
    assert "latest" in rule  # fails: the rule gives 1.1.1 only 1.1-latest


def test_withdraw_beside_a_newer_release_published_in_part_never_leaves_latest_on_the_withdrawn_one(
    repo: Path, tmp_path: Path
) -> None:
    # Found: with 1.2 published in part (its publish failed at the regions, not withdrawn),
    # withdraw 1.1 moves latest back to 1.0, which the line rule would not give 1.0 (1.2 has not
    # left it). Kept, and said in lifecycle.md: the other way would leave latest serving the
    # withdrawn 1.1 until 1.2's release is finished. No command moves it back and forth: a
    # publish of 1.0 moves nothing, and the rerun that finishes 1.2 takes latest forward.
    manifests(repo, ["1.0", "1.1", "1.2"])
    with channel(repo, tmp_path, "production") as ch:
        digests = publish(ch, ["1.0", "1.1"], tmp_path / "spool").digests
        _publish_at_public_only(ch, "1.2", tmp_path / "spool")
        _at(ch, "withdraw", f"{IMAGE}:1.1", "--reason", "bad")
        serving = set(ch.served("latest").values())
        of_10, of_12 = moves(ch, "1.0"), moves(ch, "1.2")

    assert serving == {digests["1.0"]}  # never the withdrawn 1.1
    assert "latest" not in of_10  # a publish of 1.0 moves it nowhere
    assert "latest" in of_12  # the rerun that finishes 1.2 takes it forward


# --- 2. `list` with a release record it cannot read -------------------------------------------

ESC = "\x1b]0;owned\x07\x1b[2J"


def _record(root: Path, version: str, **extra: object) -> Path:
    from xpu_release.release.model.record import ReleaseRecord, default_path, write

    path = default_path(root, IMAGE, version)
    write(ReleaseRecord(
        ref=f"{IMAGE}:{version}", manifest=f"manifests/{IMAGE}/{version}.yaml", manifest_sha256="",
        inputs_sha256="", tested_image_id="sha256:" + "1" * 64, digest="sha256:" + "2" * 64,
        published_at="2026-12-01", complete=True, floating_moved=(),
    ), path)  # fmt: skip
    data = json.loads(path.read_text())
    data.update(extra)
    path.write_text(json.dumps(data))
    return path


def test_list_escapes_the_reason_a_damaged_record_cannot_be_read(repo: Path) -> None:
    # The record's schema error names the key path where it went wrong; a key of
    # evaluation.images is any text of the file. `list` echoes the error raw into its row
    # (every error on stderr goes through shown_lines; `list`'s stdout does not): an escape
    # sequence reaches the terminal, and a line break forges a row of its own.
    manifests(repo, ["1.0"])
    _record(repo, "1.0", evaluation={"status": "skipped", "reason": "x",
                                     "images": {f"{ESC}\ndemo:9.9  forged row": 5}})  # fmt: skip

    listed = run(repo, "list")

    assert listed.exit_code == 0, listed.stderr
    assert "withdrawn: cannot tell from its record" in listed.stdout
    assert "\x1b" not in listed.stdout  # fails: the escape sequence is printed as is
    assert not any(line.startswith("demo:9.9") for line in listed.stdout.splitlines())


def test_list_escapes_the_reason_a_record_says_a_release_is_withdrawn(repo: Path) -> None:
    # Not new in this change, beside it: the record's withdrawal reason (any text of the file:
    # records are archived and handed around) is echoed raw by `list`.
    manifests(repo, ["1.0"])
    _record(repo, "1.0", withdrawn={"at": "2026-12-02", "by": "ci", "reason": f"bad{ESC}\ndemo:9.9  forged",
                                    "notice": "sha256:" + "3" * 64})  # fmt: skip

    listed = run(repo, "list")

    assert listed.exit_code == 0, listed.stderr
    assert "withdrawn 2026-12-02: bad" in listed.stdout
    assert "\x1b" not in listed.stdout  # fails


# --- 3. a --record of another release ----------------------------------------------------------


def test_notes_refuse_a_record_of_another_release(repo: Path) -> None:
    # 60d7d95 made record.of_release "the one check" that a --record is this release's, for
    # verify and status. `notes --record` still reads any record (records.read) and writes the
    # notes of demo:1.1 with demo:1.0's published refs and digest, exit 0.
    manifests(repo, ["1.0", "1.1"])
    other = _record(repo, "1.0", endpoints=[{
        "endpoint": "public", "host": "registry.example.com",
        "version_ref": "registry.example.com/ns/demo:1.0",
        "floating_refs": [], "status": "verified", "digest": "sha256:" + "2" * 64}])  # fmt: skip

    done = run(repo, "notes", f"{IMAGE}:1.1", "--record", str(other))

    assert "2222222222" not in done.stdout  # fails: 1.0's digest in 1.1's notes
    assert done.exit_code == 3, done.stdout  # fails: exit 0


# --- 6. bounded.Sight --------------------------------------------------------------------------


def test_an_evaluation_stage_inspects_each_image_once() -> None:
    # dd42da8: "an evaluation stage inspects each image once for both its compile cache and its
    # mask". Served._server caches with `self._configs.setdefault(image, self.sight.config(image))`,
    # whose default is evaluated every time: each arm of an image inspects it again.
    from xpu_release.image.served import Served

    from ..image.test_served import LIMITS, FakeEngine

    engine = FakeEngine()
    inspected: list[str] = []
    said = engine.inspect_image

    def counted(image: str) -> dict[str, object]:
        inspected.append(image)
        return said(image)

    engine.inspect_image = counted  # type: ignore[method-assign]
    with Served(engine) as runner:
        for env in ({}, {"XPU_BENCH_COMPILE": "1"}, {"XPU_BENCH_CKPT": "1"}):
            runner.prepare(
                "img:1", ["xpu-bench", "--steps", "30"], env=env, purpose="evaluate", limits=LIMITS
            )

    assert len(engine.created) == 3
    assert inspected == ["img:1"]  # fails: ['img:1', 'img:1', 'img:1']


def test_an_engine_error_on_the_first_info_does_not_unmask_every_later_emulated_container() -> None:
    # Sight caches a refused /info as {} for the client's life: one 500 from dockerd at the first
    # container (not a proxy's refusal: a server error) and every later container of an arm64
    # image on this x86-64 engine starts without the cpu-topology mask (torch then hangs under
    # emulation until the timeout), and cpu_count says 1 for the rest of the command. Before
    # dd42da8 each container asked again.
    from docker.errors import APIError

    from xpu_release.image.engine import EMULATED_MASKS, Engine

    from ..image.test_emulated import Engined

    client = Engined("arm64", "x86_64")
    said = client.info
    calls: list[int] = []

    def flaky() -> dict[str, str]:
        calls.append(1)
        if len(calls) == 1:
            msg = "500 Server Error: Internal Server Error (context deadline exceeded)"
            raise APIError(msg)
        return said()

    client.info = flaky  # type: ignore[method-assign]
    engine = Engine(client)
    for _ in range(2):
        with engine.container("img:1", purpose="smoke"):
            pass

    assert client.started[-1]["tmpfs"] == EMULATED_MASKS  # fails: {} for every container after
