"""``mirror``: a published release, with everything that refers to it, copied by digest to
another registry repository or to an OCI image layout directory (``oci:DIR``, for an
air-gapped region), and back from one into a registry.

What travels: the image manifest and its blobs; every referrer of it (SBOM, provenance, VEX,
cosign bundles, and anything else attached) with its blobs; cosign's ``.att`` tag. Of an image
index at the tag (a platformed release), each image it names first, each with its blobs, its
referrers and its ``.att`` (an index naming an image the source does not serve is refused
before any write), then the index with its own. Then the version tag, last, once every blob is
proven at the target, so that a broken copy is never visible at the tag. Digests never change
(the bytes are copied, nothing is re-serialized). A target whose version tag holds another
image is refused (exit 9), nothing written. Floating tags are not copied: they are the
release's to move.

A copy is proven where it lands. A blob the target already holds is skipped only once proven
intact (in a layout: hashed; in a registry: read back after the copy), and a damaged one is
copied again, not trusted. Every blob is moved into place only once its bytes are proven to be
the size and digest the manifest lists (``guard.proven.write_proven``); one that is not is
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import (
    NotFoundError,
    RegistryAuthError,
    ReleaseError,
    StackError,
    TagConflict,
    TLSVerifyFailed,
    WireError,
    is_down,
)
from ...evidence.cosign import att_tag
from ...evidence.referrers import kind_of
from ...guard.proven import NotAsNamed
from ...oci.model import ImageManifest
from ...oci.registry import Manifest
from ...oci.toc import LayerCheck, TocNamed, held, toc_named
from ...progress import Sink, Tally
from .attached import blobs_of, is_index, members
from .sides import Side


class NothingAtTag(NotFoundError):
    """The source serves nothing at the release's version (the caller says what to do)."""


# Distribution keeps the blob it holds when the same digest is uploaded again: damage in its
# storage outlives a copy, and only its operator can remove it.
STILL_DAMAGED = (
    "still after it was copied again (the target keeps its damaged copy: remove it there, then mirror again)"
)


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


@dataclass
class _Copier:
    """The blobs of a mirror, each copied (or proven present) once however many manifests list
    it: every one is looked up at the target first (``plan``), the ones it lacks are checked at
    the source, and only then is anything copied (``copy_missing``)."""

    source: Side
    target: Side
    spool: Path
    report: MirrorReport
    on_line: Sink
    blobs: dict[str, int] = field(default_factory=dict)  # digest → size, in the order met
    missing: list[tuple[str, int]] = field(default_factory=list)  # what the target lacks
    tocs: dict[str, TocNamed] = field(default_factory=dict)  # eStargz layers: what names their TOC
    held: set[str] = field(default_factory=set)  # eStargz layers held against their TOC in this run

    def __post_init__(self) -> None:
        self.tally = Tally(f"copying to {self.target.name}")

    def plan(self, manifest: Manifest) -> None:
        view = manifest.view
        for d in view.layers if isinstance(view, ImageManifest) else ():
            if not (named := toc_named(d.annotations)):
                continue
            if self.tocs.setdefault(d.digest, named) != named:  # two manifests, two TOCs: one lies
                why = "is named with more than one eStargz TOC (the manifests disagree): at most one holds"
                raise self.source.damaged(d.digest, why)
        for digest, size in blobs_of(self.source, manifest):
            if digest in self.blobs:
                continue
            self.blobs[digest] = size
            if self.target.holds(digest, size):
                self.report.blobs_skipped += 1
            else:
                self.missing.append((digest, size))

    def copy_missing(self) -> None:
        """What the target lacks: checked at the source before the first write (a damaged layout
        leaves the target as it was), then copied."""
        total = sum(size for _, size in self.missing)
        self.source.check(self.missing, Tally(f"checking {self.source.name}", total), self.tocs)
        if self.source.checks_whole:  # a layout: its eStargz layers were held in that read
            self.held |= {d for d, _ in self.missing if d in self.tocs}
        step = max(1, len(self.missing) // 20)
        for i, (digest, size) in enumerate(self.missing, 1):
            self.copy(digest, size)
            if len(self.missing) >= 100 and (i % step == 0 or i == len(self.missing)):
                self.on_line(f"blobs: {i:,} of {len(self.missing):,} copied")
        self.hold_the_rest()

    def hold_the_rest(self) -> None:
        """An eStargz layer the target held already is held against its TOC there, before any
        manifest that names it is written: what the target holds is the blob's bytes, but the
        manifest being copied may lie about them. One whose bytes there are not the blob is left
        to ``prove``, which copies it again, its TOC held on the way."""
        for digest, named in self.tocs.items():
            if digest in self.held or digest not in self.blobs:
                continue
            toc = LayerCheck(dict(named))
            try:
                whole = held(self.target.blocks(digest, self.blobs[digest]), digest, toc)
            except ReleaseError:
                continue  # not readable there as the blob: prove's to find and copy again
            if not whole:
                continue
            if problem := toc.problem:
                raise self.source.damaged(digest, f"is an eStargz layer whose TOC does not hold: {problem}")
            self.held.add(digest)

    def copy(self, digest: str, size: int) -> None:
        """One blob copied; an eStargz layer's bytes held against its TOC on the way, so that one
        whose TOC lies is never stored (``oci/toc``)."""
        blocks = self.source.blocks(digest, size)
        # Its TOC, unless it was held in this run already (a layout's check before the first write).
        toc = LayerCheck(dict(self.tocs[digest])) if digest in self.tocs and digest not in self.held else None

        def counted() -> Iterator[bytes]:
            for block in blocks:
                self.tally.add(len(block))
                if toc is not None:
                    toc.feed(block)
                yield block

        def holds() -> str | None:  # asked once the bytes are proven to be the blob
            problem = toc.problem if toc is not None else None
            return f"is an eStargz layer whose TOC does not hold: {problem}" if problem else None

        try:
            self.target.store_blob(digest, size, counted(), self.spool, holds)
        except NotAsNamed as exc:
            raise self.source.damaged(digest, exc.got) from None
        finally:
            close = getattr(blocks, "close", None)
            if close is not None:
                close()
        if toc is not None:
            self.held.add(digest)
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
        if is_down(exc):  # no answer at all, after the retries (not a wrong or slow one)
            msg = f"{exc.message}: the registry does not answer; check the host name and the network"
            raise StackError(msg) from None
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


@dataclass(frozen=True)
class _Subject:
    """A manifest the mirror carries with its referrers, what the attached indexes among them
    list (``parts``) and its ``.att`` tag: an image; an index and each image it names."""

    manifest: Manifest
    referrers: list[Manifest]
    parts: list[Manifest]
    att: Manifest | None

    @classmethod
    def read(cls, source: Side, manifest: Manifest) -> _Subject:
        referrers = source.referrers(manifest.digest)
        return cls(
            manifest, referrers, members(source, referrers), source.get_manifest(att_tag(manifest.digest))
        )

    @property
    def manifests(self) -> list[Manifest]:
        return [self.manifest, *self.referrers, *self.parts, *([self.att] if self.att else [])]

    @property
    def listing(self) -> list[tuple[Manifest, str | None]]:
        att = [(self.att, att_tag(self.manifest.digest))] if self.att is not None else []
        return [(self.manifest, None), *((m, None) for m in self.referrers), *att]


def _subjects(source: Side, top: Manifest) -> list[_Subject]:
    """What a copy of ``top`` carries: of an image index at the tag (a platformed release), each
    image it names first (a copy never names a manifest its target lacks), then the index; each
    with its referrers and ``.att``."""
    images = []
    for entry in top.manifests if is_index(top) else ():
        image = source.get_manifest(entry.digest)
        if image is None or is_index(image):
            msg = f"{source.name}: the index {top.digest} names {entry.digest}, not served as an image"
            raise NotFoundError(msg)
        images.append(image)
    return [_Subject.read(source, m) for m in (*images, top)]


def _mirror(source: Side, target: Side, tag: str, spool: Path, on_line: Sink, tag_it: bool) -> MirrorReport:
    report = MirrorReport(source=source.name, target=target.name, tag=tag)
    image = source.get_manifest(tag)
    if image is None:
        msg = f"{source.name} serves nothing at {tag}"
        raise NothingAtTag(msg)
    report.digest = image.digest
    held = target.resolve(tag)
    if held is not None and held != image.digest:
        msg = (f"{target.name}:{tag} holds {held}, not {image.digest}: another image is there; "
               "mirror into another repository, or remove that tag first")  # fmt: skip
        raise TagConflict(msg)
    # Everything the copy is made of is read and checked before the first write (a layout's
    # blobs hashed; a registry's each proven before it is put): a damaged layout leaves the
    # target as it was.
    subjects = _subjects(source, image)
    for subject in subjects:
        for m in subject.manifests:
            blobs_of(source, m)
    on_line(f"copying {image.digest[:19]} from {source.name} to {target.name}")
    copier = _Copier(source, target, spool, report, on_line)
    for subject in subjects:
        _plan_subject(copier, subject, on_line)
    copier.copy_missing()
    every = [m for subject in subjects for m in subject.referrers]
    report.referrers = [m.digest for m in every]
    report.kinds = sorted({k for m in every if (k := kind_of(m))})
    report.att = subjects[-1].att is not None
    for subject in subjects:
        target.put_members(subject.parts)  # before the indexes that list them
        target.put_manifests(subject.listing, None)
        if subject.referrers:
            target.list_referrers(subject.manifest, subject.referrers)
    damaged = copier.prove()
    if not damaged and tag_it:  # the tag last, once every blob is proven: a broken copy never shows
        target.put_manifests([(image, tag)], tag)
    report.problems = damaged
    for subject in subjects:
        at = tag if tag_it and subject.manifest is image else None
        report.problems += check(target, at, subject.manifest, subject.referrers, subject.att)
    return report


def _plan_subject(copier: _Copier, subject: _Subject, on_line: Sink) -> None:
    """Every manifest of ``subject`` looked up at the target: the image, its referrers (a long
    list says how far it got), its parts and its ``.att`` tag."""
    copier.plan(subject.manifest)
    referrers = subject.referrers
    step = max(1, len(referrers) // 20)
    for i, m in enumerate(referrers, 1):
        copier.plan(m)
        if len(referrers) >= 100 and (i % step == 0 or i == len(referrers)):
            on_line(f"referrers: {i:,} of {len(referrers):,} checked")
    for m in (*subject.parts, *([subject.att] if subject.att else [])):
        copier.plan(m)


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
