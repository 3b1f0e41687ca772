"""``mirror``: a published release, with everything that refers to it, copied by digest to
another registry repository or to an OCI image layout directory (``oci:DIR``, for an
air-gapped region), and back from one into a registry.

What travels: the image manifest and its blobs; every referrer of it (SBOM, provenance, VEX,
cosign bundles, and anything else attached) with its blobs; cosign's ``.att`` tag; then the
version tag, last, so that a copy broken halfway is never visible at the tag. Digests never
change (the bytes are copied, nothing is re-serialized). A target whose version tag holds
another image is refused (exit 9), nothing written. Present blobs are skipped, so a rerun
resumes. After the copy the target is checked: the tag names the digest, every blob is there,
every referrer is listed. Floating tags are not copied: they are the release's to move.

On a registry without the referrers API the referrers tag schema's index is kept
(``referrers.py``); in a layout the referrers are listed untagged in ``index.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..errors import DamagedFileError, NotFoundError, TagConflict
from ..evidence.cosign import att_tag
from ..evidence.referrers import findable, list_referrers
from ..oci.layout import Layout
from ..oci.model import is_sha256
from ..oci.registry import Manifest, RegistryClient
from ..oci.store import holds
from ..progress import Sink


class Side(Protocol):
    """One end of a mirror: a registry repository, or a layout."""

    @property
    def name(self) -> str: ...

    def resolve(self, tag: str) -> str | None: ...
    def get_manifest(self, reference: str) -> Manifest | None: ...
    def has_blob(self, digest: str) -> bool: ...
    def fetch_blob(self, digest: str, size: int, dest: Path) -> None: ...
    def put_blob(self, digest: str, path: Path) -> None: ...
    def put_manifest(self, manifest: Manifest, tag: str | None) -> None: ...
    def referrers(self, subject: str) -> list[Manifest]: ...
    def list_referrers(self, subject: Manifest, pushed: list[Manifest]) -> None: ...


@dataclass
class RegistrySide:
    client: RegistryClient
    repo: str

    @property
    def name(self) -> str:
        return f"{self.client.endpoint.host}/{self.repo}"

    def resolve(self, tag: str) -> str | None:
        return self.client.head_manifest(self.repo, tag)

    def get_manifest(self, reference: str) -> Manifest | None:
        return self.client.get_manifest(self.repo, reference)

    def has_blob(self, digest: str) -> bool:
        return self.client.blob_exists(self.repo, digest)

    def fetch_blob(self, digest: str, size: int, dest: Path) -> None:
        self.client.download_blob(self.repo, digest, dest, size=size)

    def put_blob(self, digest: str, path: Path) -> None:
        self.client.upload_blob(self.repo, digest, path)

    def put_manifest(self, manifest: Manifest, tag: str | None) -> None:
        self.client.put_manifest(self.repo, tag or manifest.digest, manifest)

    def referrers(self, subject: str) -> list[Manifest]:
        found = list_referrers(self.client, self.repo, subject)
        out = []
        for d in found.descriptors:
            m = self.client.get_manifest(self.repo, d.digest)
            if m is None:
                msg = f"{self.name}: the referrer {d.digest} is listed but not served"
                raise NotFoundError(msg)
            out.append(m)
        return out

    def list_referrers(self, subject: Manifest, pushed: list[Manifest]) -> None:
        findable(self.client, self.repo, subject, pushed)


@dataclass
class LayoutSide:
    layout: Layout

    @property
    def name(self) -> str:
        return f"oci:{self.layout.root}"

    def resolve(self, tag: str) -> str | None:
        return self.layout.resolve(tag) if self.layout.exists() else None

    def get_manifest(self, reference: str) -> Manifest | None:
        return self.layout.get_manifest(reference)

    def has_blob(self, digest: str) -> bool:
        return self.layout.has_blob(digest)

    def fetch_blob(self, digest: str, size: int, dest: Path) -> None:
        if not self.layout.has_blob(digest):
            msg = f"{self.name}: blob {digest} is missing"
            raise NotFoundError(msg)
        with dest.open("wb") as out:
            for block in self.layout.blob_chunks(digest, size):
                out.write(block)
        if not holds(dest, digest):
            dest.unlink(missing_ok=True)
            msg = f"{self.name}: blob {digest} does not hash to its name (damaged); copy the layout again"
            raise DamagedFileError(msg)

    def put_blob(self, digest: str, path: Path) -> None:
        self.layout.create()  # made on the first write: a copy that cannot start leaves nothing
        self.layout.put_file(digest, path)

    def put_manifest(self, manifest: Manifest, tag: str | None) -> None:
        self.layout.create()
        self.layout.put_manifest(manifest, tag)

    def referrers(self, subject: str) -> list[Manifest]:
        return self.layout.referrers(subject) if self.layout.exists() else []

    def list_referrers(self, subject: Manifest, pushed: list[Manifest]) -> None:
        return None  # put_manifest listed each one in index.json


@dataclass
class MirrorReport:
    source: str
    target: str
    tag: str
    digest: str = ""
    referrers: list[str] = field(default_factory=list)
    att: bool = False
    blobs_copied: int = 0
    blobs_skipped: int = 0
    bytes_copied: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _blobs(side: Side, manifest: Manifest) -> list[tuple[str, int]]:
    """The blobs a manifest read from ``side`` lists (each descriptor was checked when it was
    read); one that is not sha256 is named: a layout holds sha256 blobs only."""
    out = manifest.blobs()
    if not all(is_sha256(d) for d, _ in out):
        msg = f"{side.name}: {manifest.digest} lists a blob that is not a sha256 digest"
        raise DamagedFileError(msg)
    return out


def _copy(source: Side, target: Side, manifest: Manifest, tag: str | None, spool: Path, report: MirrorReport,
          on_line: Sink) -> None:  # fmt: skip
    for digest, size in _blobs(source, manifest):
        if target.has_blob(digest):
            report.blobs_skipped += 1
            continue
        tmp = spool / digest.replace(":", "-")
        try:
            source.fetch_blob(digest, size, tmp)
            target.put_blob(digest, tmp)
        finally:
            tmp.unlink(missing_ok=True)
        report.blobs_copied += 1
        report.bytes_copied += size
        if size > 50 << 20:
            on_line(f"copied {digest[:19]} ({size / 1e6:.0f} MB) to {target.name}")
    target.put_manifest(manifest, tag)


def mirror(source: Side, target: Side, tag: str, spool: Path, on_line: Sink = lambda _: None) -> MirrorReport:
    """Copy what ``source`` serves at ``tag`` to ``target``, with its referrers and ``.att``."""
    report = MirrorReport(source=source.name, target=target.name, tag=tag)
    image = source.get_manifest(tag)
    if image is None:
        msg = f"{source.name} serves nothing at {tag}: publish it first, or name the source with --from"
        raise NotFoundError(msg)
    report.digest = image.digest
    held = target.resolve(tag)
    if held is not None and held != image.digest:
        msg = (f"{target.name}:{tag} holds {held}, not {image.digest}: another image is there; "
               "mirror into another repository, or remove that tag first")  # fmt: skip
        raise TagConflict(msg)
    # Everything the copy is made of is read (and checked) before the first write: a damaged
    # source leaves the target as it was.
    referrers = source.referrers(image.digest)
    att = source.get_manifest(att_tag(image.digest))
    for m in [image, *referrers, *([att] if att else [])]:
        _blobs(source, m)
    spool.mkdir(parents=True, exist_ok=True)
    on_line(f"copying {image.digest[:19]} from {source.name} to {target.name}")
    _copy(source, target, image, None, spool, report, on_line)
    for m in referrers:
        _copy(source, target, m, None, spool, report, on_line)
    report.referrers = [m.digest for m in referrers]
    if att is not None:
        _copy(source, target, att, att_tag(image.digest), spool, report, on_line)
        report.att = True
    if referrers:
        target.list_referrers(image, referrers)
    target.put_manifest(image, tag)  # the tag last: a broken copy is never visible at it
    report.problems = check(target, tag, image, referrers, att)
    return report


def check(
    target: Side, tag: str, image: Manifest, referrers: list[Manifest], att: Manifest | None
) -> list[str]:
    """What the target lacks of the copy: the tag, a blob, a referrer, the ``.att`` tag."""
    problems = []
    if target.resolve(tag) != image.digest:
        problems.append(f"{target.name}:{tag} does not name {image.digest}")
    for m in [image, *referrers, *([att] if att else [])]:
        problems += [f"{target.name}: blob {d} of {m.digest[:19]} is missing"
                     for d, _ in _blobs(target, m) if not target.has_blob(d)]  # fmt: skip
    listed = {m.digest for m in target.referrers(image.digest)}
    problems += [
        f"{target.name}: the referrer {m.digest} is not listed" for m in referrers if m.digest not in listed
    ]
    if att is not None and target.resolve(att_tag(image.digest)) != att.digest:
        problems.append(f"{target.name}: {att_tag(image.digest)} does not name {att.digest}")
    return problems
