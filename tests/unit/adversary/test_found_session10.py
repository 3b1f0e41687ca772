"""Adversarial review, session 10: the eStargz TOC check of ``mirror`` (held whole in a layout's
check before the first write) and of ``verify --deep`` (``Checked.shared``), and the prefetch
profile's reader (``image.layerform.read_profile``).

Each test below fails on the code as it stands because of a defect, except the ones marked
"withstood" (attacks that were expected to work and did not)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from xpu_release.errors import DamagedFileError, ManifestError
from xpu_release.image.layerform import layer_form, profile_path, read_profile
from xpu_release.oci.endpoint import Endpoint
from xpu_release.oci.estargz import TOC_DIGEST_ANNOTATION
from xpu_release.oci.layout import Layout
from xpu_release.oci.registry import OCI_INDEX, OCI_MANIFEST, Manifest, sha256_digest
from xpu_release.release.publishing.blobjobs import Job, check_blobs
from xpu_release.release.publishing.mirror import mirror
from xpu_release.release.publishing.sides import LayoutSide, RegistrySide

from ..fake_registry import State, fake_registry
from ..oci.estargz_layers import layer_tar, with_toc, written
from ..oci.test_codec import client_for
from ..release.layouts import LAYER_TYPE

TAG = "1.0"
REPO = "ns/image"


# --- helpers -------------------------------------------------------------------------------------


def honest() -> tuple[bytes, dict[str, str]]:
    """An eStargz layer our writer made, and the annotations that name its TOC."""
    made, _, blob = written(layer_tar({"usr/bin/tool": b"x" * 70_000, "etc/conf": b"y = 1\n"}))
    return blob, made.annotations()


def lie_about_a_chunk(doc: dict[str, Any]) -> None:
    entry = next(e for e in doc["entries"] if e.get("chunkDigest"))
    entry["chunkDigest"] = "sha256:" + "0" * 64


def lying() -> tuple[bytes, dict[str, str]]:
    """An eStargz layer whose TOC lies about a chunk (well formed, named rightly by its annotation)."""
    blob, _ = honest()
    return with_toc(blob, lie_about_a_chunk)


def _image(layout: Layout, arch: str, layers: list[tuple[bytes, dict[str, str] | None]]) -> Manifest:
    config = json.dumps({"architecture": arch, "os": "linux", "rootfs": {"type": "layers"}}).encode()
    layout.put_bytes(config)
    described = []
    for blob, notes in layers:
        digest = sha256_digest(blob)
        if not layout.has_blob(digest):
            layout.write_blob(digest, len(blob), [blob])
        d: dict[str, Any] = {"mediaType": LAYER_TYPE, "digest": digest, "size": len(blob)}
        if notes is not None:
            d["annotations"] = notes
        described.append(d)
    data = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": sha256_digest(config), "size": len(config)},
        "layers": described,
    }  # fmt: skip
    body = json.dumps(data, sort_keys=True).encode()
    image = Manifest(digest=sha256_digest(body), media_type=OCI_MANIFEST, body=body)
    layout.put_bytes(body)
    return image


def image_layout(root: Path, blob: bytes, annotations: dict[str, str]) -> Manifest:
    """A layout at ``root`` whose image at ``TAG`` has one layer, ``blob``, annotated so."""
    layout = Layout(root)
    layout.create()
    image = _image(layout, "amd64", [(blob, annotations)])
    layout.put_manifests([(image, None), (image, TAG)], version_tag=TAG)
    return image


def platformed_layout(root: Path, per_platform: list[tuple[str, bytes, dict[str, str] | None]]) -> Manifest:
    """A layout at ``root`` whose release at ``TAG`` is an index of one image a platform, each
    image listing its one layer with the annotations given for that platform."""
    layout = Layout(root)
    layout.create()
    images = [(arch, _image(layout, arch, [(blob, notes)])) for arch, blob, notes in per_platform]
    index_data = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": m.digest, "size": len(m.body),
             "platform": {"architecture": arch, "os": "linux"}}
            for arch, m in images
        ],
    }  # fmt: skip
    body = json.dumps(index_data, sort_keys=True).encode()
    index = Manifest(digest=sha256_digest(body), media_type=OCI_INDEX, body=body)
    layout.put_manifests([*((m, None) for _, m in images), (index, None), (index, TAG)], version_tag=TAG)
    return index


# --- 1. mirror: the TOC check is keyed by digest, not by (digest, annotations) --------------------


def test_mirror_holds_a_shared_estargz_layer_against_every_manifest_that_annotates_it(
    tmp_path: Path,
) -> None:
    """Done: a platformed release in a layout (an index of an amd64 and an arm64 image) whose
    two images share one eStargz layer (an arch-independent layer: sources, data). The amd64
    image annotates it with a ``toc.digest`` that lies; the arm64 image, listed after it, with
    the true one. Mirrored to another layout.

    Happened: the mirror succeeds and writes both images and the tag. ``_Copier.plan`` keeps one
    set of annotations a digest (``self.tocs |= …``: the last manifest planned wins), so only the
    arm64 image's (true) annotation is held against the TOC; the amd64 image's lie is copied.

    Should: the layer is held against each descriptor's annotations (the TOC is a claim of each
    manifest, not of the blob): the amd64 image's descriptor does not hold, and the mirror
    refuses before the first write (DamagedFileError, exit 12), as for a single image.

    Matters: the commit promises that a layer whose TOC does not hold leaves the target as it
    was; a lazy puller of the amd64 image meets a TOC its annotation does not name. Whoever
    controls the order of an index's entries chooses which claim is checked."""
    blob, annotations = honest()
    lie = {**annotations, TOC_DIGEST_ANNOTATION: "sha256:" + "1" * 64}
    platformed_layout(tmp_path / "src", [("amd64", blob, lie), ("arm64", blob, annotations)])
    target = tmp_path / "dst"

    with pytest.raises(DamagedFileError) as caught:
        mirror(LayoutSide(Layout(tmp_path / "src")), LayoutSide(Layout(target)), TAG, tmp_path / "cache")

    # Fixed as: two manifests naming one blob with two TOCs is refused as such (at most one can
    # hold), before the first write.
    assert "is named with more than one eStargz TOC" in caught.value.message
    assert not target.exists()


def test_mirror_holds_a_lying_estargz_layer_the_target_already_holds(tmp_path: Path) -> None:
    """Done: a layout whose image at ``TAG`` has one eStargz layer whose TOC lies about a chunk
    (well formed; its annotation names it rightly). The target layout already holds that blob
    (an earlier copy of an image listing it as a plain gzip layer, or any other tool's write:
    here written straight into the target's blobs), and nothing else.

    Happened: the mirror succeeds: the image is written and tagged at the target. A blob the
    target holds is skipped in ``plan`` (``target.holds``) before ``check`` ever sees it, so the
    TOC is never read; ``prove`` only hashes it.

    Should: DamagedFileError naming the TOC that does not hold, and no tag at the target: the
    check is of the release being copied (the manifest's claim about the layer), not of the
    bytes being moved, which the target's holding them does not vouch for.

    Matters: the same lying layer that is refused into an empty target is accepted into one that
    happens to hold its bytes: the outcome depends on the target's history, and a mirror reports
    ``ok`` for a release whose lazy pullers see another file system than its plain pullers."""
    blob, annotations = lying()
    image_layout(tmp_path / "src", blob, annotations)
    target = Layout(tmp_path / "dst")
    target.create()
    target.write_blob(sha256_digest(blob), len(blob), [blob])

    with pytest.raises(DamagedFileError) as caught:
        mirror(LayoutSide(Layout(tmp_path / "src")), LayoutSide(target), TAG, tmp_path / "cache")

    assert "is an eStargz layer whose TOC does not hold" in caught.value.message
    assert target.resolve(TAG) is None


def test_mirror_does_not_follow_a_link_for_an_estargz_layer_it_refuses_for_a_plain_one(
    tmp_path: Path,
) -> None:
    """Done: two layouts, each with one image at ``TAG`` whose one layer's blob file is a
    symbolic link to a file outside the layout holding the right bytes: in the first the layer
    is a plain gzip layer, in the second an eStargz layer (annotated). Each mirrored to a layout.

    Happened: the plain layer is refused (exit 12: ``Layout.proven`` opens with O_NOFOLLOW), the
    eStargz one is copied: the new ``LayoutSide._hold`` reads it with ``blob_chunks``, which
    follows links, and ``blocks`` (documented "never a link followed") does too.

    Should: the same verdict for both: a blob file that is a link is no blob of the layout
    (``landed``: "missing, a link, a FIFO…"), whatever the annotations of its descriptor.

    Matters: the eStargz path of the check reads through links out of the layout (another
    disk, a file the layout's owner does not own) where the plain path refuses; the rule about
    what a layout may hold depends on an annotation."""
    outcomes = []
    for name, notes in (("plain", None), ("estargz", "yes")):
        blob, annotations = honest()
        src = tmp_path / name
        if notes:
            image_layout(src, blob, annotations)
        else:
            _plain_layout(src, blob)
        outside = tmp_path / f"{name}-outside"
        blob_file = Layout(src).blob_path(sha256_digest(blob))
        blob_file.replace(outside)
        blob_file.symlink_to(outside)
        try:
            dst = LayoutSide(Layout(tmp_path / f"{name}-dst"))
            mirror(LayoutSide(Layout(src)), dst, TAG, tmp_path / "cache")
        except DamagedFileError:
            outcomes.append("refused")
        else:
            outcomes.append("copied")

    assert outcomes == ["refused", "refused"]


def _plain_layout(root: Path, blob: bytes) -> Manifest:
    layout = Layout(root)
    layout.create()
    image = _image(layout, "amd64", [(blob, None)])
    layout.put_manifests([(image, None), (image, TAG)], version_tag=TAG)
    return image


# --- 2. verify --deep: the TOC verdict of a group of copies ---------------------------------------


@pytest.fixture
def two() -> Iterator[list[tuple[Endpoint, Any, State]]]:
    with fake_registry() as a, fake_registry() as b:
        out = []
        for i, (host, state) in enumerate((a, b)):
            ep = Endpoint(
                registry=f"ep{i}", role="public", region=None, host=host, namespace="ns", insecure=True
            )
            out.append((ep, client_for(host, state), state))
        yield out


def test_verify_deep_reports_a_lying_toc_at_the_endpoints_that_serve_it_when_the_first_copy_is_damaged(
    two: list[tuple[Endpoint, Any, State]],
) -> None:
    """Done: one eStargz layer whose TOC lies about a chunk, checked by ``verify --deep``'s
    ``check_blobs`` at two endpoints: endpoint 0 serves a damaged copy (one byte flipped in
    its middle: a disk fault, a cache in front of it), endpoint 1 serves the blob itself.

    Happened: endpoint 0 is reported damaged, endpoint 1 intact: the TOC's lie is reported
    nowhere. ``_read_in_step`` takes the first copy's block as the ``lead``; the genuine copy
    leaves the step where it differs, the TOC is fed the damaged bytes, ``shared`` is not the
    digest, and the verdict is dropped for every endpoint.

    Should: endpoint 1's copy is the blob, and the blob's TOC lies: endpoint 1 is reported with
    "its eStargz TOC does not hold" (the verdict of the blob, whichever copy it is read from).

    Matters: repairing endpoint 0 (mirroring again, the obvious step) leaves a release whose
    TOC lies at every endpoint, after a verify that said the others were intact. The verdict
    depends on which endpoint is listed first and whether it is healthy."""
    blob, annotations = lying()
    digest = sha256_digest(blob)
    damaged = bytearray(blob)
    damaged[len(blob) // 2] ^= 1
    (ep0, c0, s0), (ep1, c1, s1) = two
    s0.blobs[digest] = bytes(damaged)
    s1.blobs[digest] = blob
    toc = tuple(sorted(annotations.items()))
    jobs = [Job(ep0, c0, REPO, digest, len(blob), toc), Job(ep1, c1, REPO, digest, len(blob), toc)]

    findings, _ = check_blobs(jobs, deep=True)

    at = {f.endpoint: f.problem for f in findings}
    assert "ep0" in at  # the damaged copy
    assert "eStargz TOC does not hold" in at.get("ep1", ""), at


def test_verify_deep_holds_a_shared_layer_against_each_manifests_annotations(
    two: list[tuple[Endpoint, Any, State]],
) -> None:
    """Done: ``verify --deep``'s ``check_blobs`` given the jobs a platformed release makes when
    its amd64 image lists a layer as a plain gzip layer (no annotations) and its arm64 image
    lists the same blob as an eStargz layer whose TOC lies about a chunk (annotation naming the
    TOC rightly); one endpoint, both jobs there, amd64's first as ``_platform_images`` lists them.

    Happened: no finding at all. ``in_step`` groups the jobs by (digest, size) and
    ``everywhere`` takes the TOC of the group's first job only (``group[0].toc``): the plain
    listing's empty one, so the TOC is never read.

    Should: the arm64 job is reported: "its eStargz TOC does not hold" (each job's annotations
    are a claim to hold; the same holds for two eStargz listings with different annotations).

    Matters: verify --deep is the check that a published release's TOCs do not lie; a release
    passes it with a lying TOC whenever another manifest lists the same blob first."""
    blob, annotations = lying()
    digest = sha256_digest(blob)
    (ep0, c0, s0), _ = two
    s0.blobs[digest] = blob
    plain = Job(ep0, c0, REPO, digest, len(blob))
    estargz = Job(ep0, c0, REPO, digest, len(blob), tuple(sorted(annotations.items())))

    findings, _ = check_blobs([plain, estargz], deep=True)

    assert any("eStargz TOC does not hold" in f.problem for f in findings), findings


def test_withstood_verify_deep_reports_a_lying_toc_when_the_first_endpoint_lacks_the_blob(
    two: list[tuple[Endpoint, Any, State]],
) -> None:
    """Withstood: endpoint 0 lacks the blob (or is down); endpoint 1 serves the lying blob. The
    missing copy never enters the step, endpoint 1's bytes lead, ``shared`` is the digest and
    the TOC's lie is reported at endpoint 1."""
    blob, annotations = lying()
    digest = sha256_digest(blob)
    (ep0, c0, _), (ep1, c1, s1) = two
    s1.blobs[digest] = blob
    toc = tuple(sorted(annotations.items()))
    jobs = [Job(ep0, c0, REPO, digest, len(blob), toc), Job(ep1, c1, REPO, digest, len(blob), toc)]

    findings, _ = check_blobs(jobs, deep=True)

    at = {f.endpoint: f.problem for f in findings}
    assert at["ep0"] == "missing"
    assert "eStargz TOC does not hold" in at["ep1"]


# --- 3. the prefetch profile --------------------------------------------------------------------


@pytest.mark.parametrize(
    "second",
    ["/usr//bin/tool", "/usr/./bin/tool", "/usr/lib/../bin/tool", "/usr/bin/tool/"],
)
def test_a_profile_listing_one_file_twice_in_two_spellings_is_refused(tmp_path: Path, second: str) -> None:
    """Done: a committed prefetch.txt listing ``/usr/bin/tool`` and then the same file spelt
    another way (``//``, ``/./``, ``/../``, a trailing slash), as a hand edit or a merge leaves.

    Happened: ``read_profile`` takes both: its "listed before, at line N" check compares the
    lines as text, while the writer (``oci.estargz.ordered``, via ``clean``, as Go's
    ``cleanEntryName``) reads both as ``usr/bin/tool``.

    Should: the second line is a problem ("listed before, at line 1"), or a spelling that is not
    the path's clean form is refused as such (the recorder only ever writes ``realpath``s).

    Matters: the profile's rule "each path once" is what ``validate`` promises; two spellings of
    one file pass it, and also change the profile's digest (the image's inputs) without
    changing a byte of any layer."""
    path = tmp_path / "prefetch.txt"
    path.write_text(f"/usr/bin/tool\n{second}\n")

    with pytest.raises(ManifestError) as caught:
        read_profile(path, "prefetch.txt")

    assert [p.line for p in caught.value.problems] == [2]


@pytest.mark.parametrize("kind", ["a dangling link", "a FIFO", "a folder"])
def test_a_profile_that_is_no_regular_file_is_a_problem_not_no_profile(tmp_path: Path, kind: str) -> None:
    """Done: an eStargz image's version folder holds ``prefetch.txt`` as a dangling symbolic
    link (a checkout where it points at a generated file not made yet), a FIFO, or a folder.

    Happened: ``read_profile`` (and ``layer_form``) treat it as no profile: ``path.is_file()`` is
    false, so ``()`` is returned without a word; ``validate`` passes and the build writes every
    layer with no prefetch (or, for a version that ``extends``, silently takes the other
    version's profile). The guarded reader that refuses a FIFO is never reached.

    Should: a ``ManifestError`` (exit 2) naming the file and what is there instead ("is a
    FIFO…", "is a symbolic link to nothing"), as every other committed input is read.

    Matters: the profile is an input of the image (its digest is in the inputs digest); an
    input that is there but unreadable silently changes what is built instead of stopping."""
    root = tmp_path
    path = profile_path(root, "img", "1.0")
    path.parent.mkdir(parents=True)
    if kind == "a dangling link":
        path.symlink_to(root / "made-later.txt")
    elif kind == "a FIFO":
        os.mkfifo(path)
    else:
        path.mkdir()

    with pytest.raises(ManifestError):
        layer_form(root, "img", "1.0", "estargz")


def test_mirror_into_a_registry_never_uploads_a_lying_estargz_layer_when_it_replaces_a_damaged_copy(
    tmp_path: Path,
) -> None:
    """Done: a layout whose image at ``TAG`` has one eStargz layer whose TOC lies about a chunk
    (well formed; its annotation names it rightly), mirrored into a registry that already
    answers for that blob's digest with damaged bytes (a torn earlier upload, a storage fault).

    Happened: no error: the mirror uploads the lying layer itself. ``plan`` skips the blob (a
    registry "holds" what ``blob_exists`` says), so ``LayoutSide.check`` never holds it against
    its TOC; ``prove`` finds the target's copy damaged and ``copy`` sends it again, and since
    the source is a layout (``checks_whole``), ``copy`` does not hold the TOC either, trusting a
    check that never saw this blob.

    Should: DamagedFileError (exit 12) naming the TOC that does not hold, and the lying bytes
    never sent: what ``copy`` skips must have been held by ``check``.

    Matters: the commit's promise is that a layer whose TOC lies is never stored; here the
    mirror stores it, and a damaged target (the very case the re-copy exists for) is the way
    around the check."""
    blob, annotations = lying()
    digest = sha256_digest(blob)
    image_layout(tmp_path / "src", blob, annotations)
    with fake_registry() as (host, state):
        damaged = bytearray(blob)
        damaged[len(blob) // 2] ^= 1
        state.blobs[digest] = bytes(damaged)
        target = RegistrySide(client_for(host, state), REPO)

        with pytest.raises(DamagedFileError) as caught:
            mirror(LayoutSide(Layout(tmp_path / "src")), target, TAG, tmp_path / "cache")

        assert "is an eStargz layer whose TOC does not hold" in caught.value.message
        assert state.blobs.get(digest) != blob  # the lying layer was never uploaded


def test_withstood_a_layer_changed_between_the_check_and_the_copy_is_not_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Withstood (TOCTOU): an honest eStargz layer passes ``LayoutSide.check``; before the copy
    reads it, its file is swapped for a lying layer of the same size. The copy does not hold
    the TOC again (``checks_whole``), but ``write_proven`` hashes the bytes it stores: the
    swapped file is refused (exit 12) and the target gets no blob of it."""
    blob, annotations = honest()
    digest = sha256_digest(blob)
    image_layout(tmp_path / "src", blob, annotations)
    swapped = bytearray(blob)
    swapped[len(blob) // 2] ^= 1
    checked = LayoutSide.check

    def check_then_swap(self: LayoutSide, *args: Any) -> None:
        checked(self, *args)
        path = self.layout.blob_path(digest)
        tmp = path.with_name("swap")
        tmp.write_bytes(bytes(swapped))
        tmp.replace(path)

    monkeypatch.setattr(LayoutSide, "check", check_then_swap)
    target = Layout(tmp_path / "dst")

    with pytest.raises(DamagedFileError) as caught:
        mirror(LayoutSide(Layout(tmp_path / "src")), LayoutSide(target), TAG, tmp_path / "cache")

    assert "hashes to" in caught.value.message
    assert not target.blob_path(digest).exists()
