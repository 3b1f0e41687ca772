"""``mirror``: a published release, with everything that refers to it, copied by digest to
another registry repository or to an OCI image layout directory (``oci:DIR``, for an
air-gapped region), and back from one into a registry.

What travels: the image manifest and its blobs; every referrer of it (SBOM, provenance, VEX,
cosign bundles, and anything else attached) with its blobs; cosign's ``.att`` tag; then the
version tag, last, once every blob is proven at the target, so that a broken copy is never
visible at the tag. Digests never change (the bytes are copied, nothing is re-serialized). A
target whose version tag holds another image is refused (exit 9), nothing written. Floating
tags are not copied: they are the release's to move.

A copy is proven where it lands. A blob the target already holds is skipped only once proven
intact (in a layout: hashed; in a registry: read back after the copy), and a damaged one is
copied again, not trusted. Every blob is moved into place only once its bytes are proven to be
the size and digest the manifest lists (``guard.writing.write_proven``); one that is not is
blamed on its source (a damaged layout: exit 12; a registry that sent other bytes: exit 7).
After the copy the target is checked: the tag names the digest, every blob hashes to its name,
every referrer is listed. Each run spools into a folder of its own (``xpu-mirror-*`` in the
cache, removed at its end; a killed run's is a leftover ``cache prune`` removes), so two runs
sharing a cache never write one file. A host that does not answer is exit 10.

On a registry without the referrers API the referrers tag schema's index is kept
(``referrers.py``); in a layout the referrers are listed untagged in ``index.json``, written
once for all of them (under the layout's lock), not once per referrer.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..errors import (
    DamagedFileError,
    NotFoundError,
    RegistryAuthError,
    ReleaseError,
    StackError,
    TagConflict,
    TLSVerifyFailed,
    WireError,
)
from ..evidence.cosign import att_tag
from ..evidence.referrers import findable, kind_of, list_referrers
from ..guard.limits import COPY_BLOCK
from ..guard.writing import Identity, NotAsNamed, sweep, unchanged, write_proven
from ..oci.blobcheck import Source, check_copies
from ..oci.downloads import read_blob
from ..oci.layout import REF_NAME, Layout
from ..oci.members import blob_file
from ..oci.model import is_sha256
from ..oci.registry import Manifest, RegistryClient
from ..progress import Sink, Tally

Counted = Tally | None
Listing = list[tuple[Manifest, str | None]]  # manifests to put, each at its tag (None: by digest)


class NothingAtTag(NotFoundError):
    """The source serves nothing at the release's version (the caller says what to do)."""


PROVING_THREADS = 4  # blobs read back at once from a registry target
# Distribution keeps the blob it holds when the same digest is uploaded again: damage in its
# storage outlives a copy, and only its operator can remove it.
STILL_DAMAGED = (
    "still after it was copied again (the target keeps its damaged copy: remove it there, then mirror again)"
)


class Side(Protocol):
    """One end of a mirror: a registry repository, or a layout."""

    @property
    def name(self) -> str: ...

    def resolve(self, tag: str) -> str | None: ...
    def get_manifest(self, reference: str) -> Manifest | None: ...
    def referrers(self, subject: str) -> list[Manifest]: ...

    # as the source
    def blocks(self, digest: str, size: int) -> Iterator[bytes]: ...
    def damaged(self, digest: str, why: str) -> ReleaseError: ...

    # as the target
    def holds(self, digest: str, size: int) -> bool: ...
    def store_blob(self, digest: str, size: int, blocks: Iterable[bytes], spool: Path) -> None: ...
    def put_manifests(self, manifests: Listing, version_tag: str | None) -> None: ...
    def list_referrers(self, subject: Manifest, pushed: list[Manifest]) -> None: ...
    def listed(self, subject: str) -> set[str]: ...
    def prove(self, blobs: list[tuple[str, int]], tally: Counted) -> dict[str, str]: ...


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

    def blocks(self, digest: str, size: int) -> Iterator[bytes]:
        return read_blob(self.client, self.repo, digest, COPY_BLOCK, size=size)

    def damaged(self, digest: str, why: str) -> ReleaseError:
        return WireError(f"{self.name}: blob {digest} as served {why}; nothing was copied from it")

    def holds(self, digest: str, size: int) -> bool:
        return self.client.blob_exists(self.repo, digest)  # proven after the copy: read back

    def store_blob(self, digest: str, size: int, blocks: Iterable[bytes], spool: Path) -> None:
        path = blob_file(spool, digest)  # this run's own spool: no other run writes it
        write_proven(path, digest, size, blocks, durable=False)  # uploaded, then removed
        try:
            self.client.upload_blob(self.repo, digest, path)
        finally:
            path.unlink(missing_ok=True)

    def put_manifests(self, manifests: Listing, version_tag: str | None) -> None:
        for m, tag in manifests:
            self.client.put_manifest(self.repo, tag or m.digest, m)

    def list_referrers(self, subject: Manifest, pushed: list[Manifest]) -> None:
        findable(self.client, self.repo, subject, pushed)

    def listed(self, subject: str) -> set[str]:
        return {d.digest for d in list_referrers(self.client, self.repo, subject).descriptors}

    def prove(self, blobs: list[tuple[str, int]], tally: Counted) -> dict[str, str]:
        """Every blob read back and hashed, as ``verify --deep`` does."""
        counted = tally.add if tally is not None else (lambda _: None)

        def one(blob: tuple[str, int]) -> str | None:
            digest, size = blob
            at = Source(self.client, self.repo, counted)
            ((problem, _),) = check_copies([at], digest, size, COPY_BLOCK)
            return problem

        with ThreadPoolExecutor(max_workers=PROVING_THREADS) as pool:
            found = list(pool.map(one, blobs))
        return {d: p for (d, _), p in zip(blobs, found, strict=True) if p is not None}


@dataclass
class LayoutSide:
    layout: Layout
    proven: dict[str, Identity] = field(default_factory=dict)  # this run's: hashed, or written
    made: bool = False  # created (and swept) by this run's first write

    @property
    def name(self) -> str:
        return f"oci:{self.layout.root}"

    def resolve(self, tag: str) -> str | None:
        return self.layout.resolve(tag) if self.layout.exists() else None

    def get_manifest(self, reference: str) -> Manifest | None:
        return self.layout.get_manifest(reference)

    def referrers(self, subject: str) -> list[Manifest]:
        return self.layout.referrers(subject) if self.layout.exists() else []

    def blocks(self, digest: str, size: int) -> Iterator[bytes]:
        """The blob's bytes, bounded by ``size`` (a regular file only: never a link followed or
        a FIFO waited on; one of another size is damage)."""
        if not self.layout.has_blob(digest):
            msg = f"{self.name}: blob {digest} is missing (or is not a regular file); copy the layout again"
            raise NotFoundError(msg)
        return self.layout.blob_chunks(digest, size)

    def damaged(self, digest: str, why: str) -> ReleaseError:
        return DamagedFileError(f"{self.name}: blob {digest} {why} (damaged); copy the layout again")

    def _begin(self) -> None:
        """Made on the first write (a copy that cannot start leaves nothing), and the unlocked
        temporaries of killed runs swept from it."""
        if not self.made:
            self.layout.create()
            for folder in (self.layout.root, self.layout.root / "blobs" / "sha256"):
                sweep(folder, within=self.layout.root)
            self.made = True

    def holds(self, digest: str, size: int) -> bool:
        identity = self.layout.proven(digest, size)
        if identity is not None:
            self.proven[digest] = identity
        return identity is not None

    def store_blob(self, digest: str, size: int, blocks: Iterable[bytes], spool: Path) -> None:
        self._begin()
        self.proven[digest] = self.layout.write_blob(digest, size, blocks)

    def put_manifests(self, manifests: Listing, version_tag: str | None) -> None:
        self._begin()
        self.layout.put_manifests(manifests, version_tag=version_tag)

    def list_referrers(self, subject: Manifest, pushed: list[Manifest]) -> None:
        return None  # put_manifests listed each one in index.json

    def listed(self, subject: str) -> set[str]:
        entries = self.layout.entries()
        return {str(e.get("digest")) for e in entries if not (e.get("annotations") or {}).get(REF_NAME)}

    def prove(self, blobs: list[tuple[str, int]], tally: Counted) -> dict[str, str]:
        """Every blob hashed, but once: one proven in this run (hashed before it was skipped, or
        as it was written) whose file has not changed since is not read again."""
        problems = {}
        for digest, size in blobs:
            known = self.proven.get(digest)
            if known is not None and unchanged(self.layout.blob_path(digest), known):
                continue
            if not self.holds(digest, size):
                problems[digest] = f"missing, or not the {size} bytes that hash to its name"
        return problems


@dataclass
class MirrorReport:
    source: str
    target: str
    tag: str
    digest: str = ""
    referrers: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)  # which of ours they are: sbom, lifecycle, withdrawal…
    att: bool = False
    blobs_copied: int = 0
    blobs_skipped: int = 0
    blobs_replaced: int = 0  # found damaged at the target (or changed since proven) and copied again
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


@dataclass
class _Copier:
    """The blobs of a mirror, each copied (or proven present) once however many manifests list it."""

    source: Side
    target: Side
    spool: Path
    report: MirrorReport
    on_line: Sink
    blobs: dict[str, int] = field(default_factory=dict)  # digest → size, in the order met

    def __post_init__(self) -> None:
        self.tally = Tally(f"copying to {self.target.name}")

    def blobs_of(self, manifest: Manifest) -> None:
        for digest, size in _blobs(self.source, manifest):
            if digest in self.blobs:
                continue
            self.blobs[digest] = size
            if self.target.holds(digest, size):
                self.report.blobs_skipped += 1
            else:
                self.copy(digest, size)

    def copy(self, digest: str, size: int) -> None:
        blocks = self.source.blocks(digest, size)

        def counted() -> Iterator[bytes]:
            for block in blocks:
                self.tally.add(len(block))
                yield block

        try:
            self.target.store_blob(digest, size, counted(), self.spool)
        except NotAsNamed as exc:
            raise self.source.damaged(digest, exc.got) from None
        finally:
            close = getattr(blocks, "close", None)
            if close is not None:
                close()
        self.report.blobs_copied += 1
        self.report.bytes_copied += size
        if size > 50 << 20:
            self.on_line(f"copied {digest[:19]} ({size / 1e6:.0f} MB) to {self.target.name}")

    def prove(self) -> list[str]:
        """Every blob hashed at the target; one that is not intact there is copied again (once),
        and what is still not intact after that is a problem."""
        listed = list(self.blobs.items())
        total = sum(size for _, size in listed)
        bad = self.target.prove(listed, Tally(f"checking at {self.target.name}", total))
        for digest in bad:
            self.copy(digest, self.blobs[digest])
            self.report.blobs_replaced += 1
        bad = self.target.prove([(d, self.blobs[d]) for d in bad], None) if bad else {}
        return [f"{self.target.name}: blob {d}: {why}, {STILL_DAMAGED}" for d, why in bad.items()]


def mirror(
    source: Side, target: Side, tag: str, spool: Path, on_line: Sink = lambda _: None, *, tag_it: bool = True
) -> MirrorReport:
    """Copy what ``source`` serves at ``tag`` to ``target``, with its referrers and ``.att``, the
    tag last (``tag_it=False``: not at all, for ``promote``, which writes the version tags only
    once every endpoint holds the release); this run's spool is a folder of its own made in
    ``spool`` and removed at the end. A registry that does not answer is ``StackError`` (exit 10)."""
    spool.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="xpu-mirror-", dir=spool))
    try:
        return _mirror(source, target, tag, work, on_line, tag_it)
    except (RegistryAuthError, TLSVerifyFailed):
        raise
    except WireError as exc:
        if exc.unanswered:  # no answer at all, after the retries (not a wrong or slow one)
            msg = f"{exc.message}: the registry does not answer; check the host name and the network"
            raise StackError(msg) from None
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _mirror(source: Side, target: Side, tag: str, spool: Path, on_line: Sink, tag_it: bool) -> MirrorReport:
    report = MirrorReport(source=source.name, target=target.name, tag=tag)
    image = source.get_manifest(tag)
    if image is None:
        msg = f"{source.name} serves nothing at {tag}"
        raise NothingAtTag(msg)
    if image.is_index:
        msg = f"{image.digest} is an image index; multi-platform copies are not supported yet"
        raise WireError(msg)
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
    on_line(f"copying {image.digest[:19]} from {source.name} to {target.name}")
    copier = _Copier(source, target, spool, report, on_line)
    copier.blobs_of(image)
    step = max(1, len(referrers) // 20)
    for i, m in enumerate(referrers, 1):
        copier.blobs_of(m)
        if len(referrers) >= 100 and (i % step == 0 or i == len(referrers)):
            on_line(f"referrers: {i:,} of {len(referrers):,} copied")
    report.referrers = [m.digest for m in referrers]
    report.kinds = sorted({k for m in referrers if (k := kind_of(m))})
    if att is not None:
        copier.blobs_of(att)
        report.att = True
    tagged_att = [(att, att_tag(image.digest))] if att is not None else []
    target.put_manifests([(image, None), *((m, None) for m in referrers), *tagged_att], None)
    if referrers:
        target.list_referrers(image, referrers)
    damaged = copier.prove()
    if not damaged and tag_it:  # the tag last, once every blob is proven: a broken copy never shows
        target.put_manifests([(image, tag)], tag)
    report.problems = damaged + check(target, tag if tag_it else None, image, referrers, att)
    return report


def check(
    target: Side, tag: str | None, image: Manifest, referrers: list[Manifest], att: Manifest | None
) -> list[str]:
    """What the target lacks of the copy besides its blobs: the tag, a referrer, the ``.att`` tag."""
    problems = []
    if tag is not None and target.resolve(tag) != image.digest:
        problems.append(f"{target.name}:{tag} does not name {image.digest}")
    listed = target.listed(image.digest)
    problems += [
        f"{target.name}: the referrer {m.digest} is not listed" for m in referrers if m.digest not in listed
    ]
    if att is not None and target.resolve(att_tag(image.digest)) != att.digest:
        problems.append(f"{target.name}: {att_tag(image.digest)} does not name {att.digest}")
    return problems
