"""The two ends a ``mirror`` copies between (``mirror.py``): a registry repository
(``RegistrySide``) and an OCI image layout directory (``LayoutSide``), each as a source and as a
target, behind one protocol (``Side``).

As a source, a side is checked before the first write (``check``): a layout's blobs are local,
so each one to be copied is hashed (its size compared first); a registry's are proven as they are
copied, each before it is put in place. As a target, a side says what it already holds (proven:
hashed in a layout, read back from a registry after the copy), stores blobs only once proven, and
lists the manifests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

from ...errors import DamagedFileError, NotFoundError, ReleaseError, WireError
from ...evidence.referrers import findable, list_referrers
from ...guard.limits import COPY_BLOCK
from ...guard.proven import unchanged, write_proven
from ...guard.writing import Identity, sweep
from ...oci.blobcheck import Source, check_copies
from ...oci.downloads import read_blob
from ...oci.layout import REF_NAME, Layout
from ...oci.members import blob_file
from ...oci.registry import Manifest, RegistryClient
from ...oci.toc import LayerCheck, TocNamed, held
from ...progress import Tally

Counted = Tally | None
Listing = list[tuple[Manifest, str | None]]  # manifests to put, each at its tag (None: by digest)
Then = Callable[[], str | None] | None  # asked once a blob's bytes are proven: what else is wrong
Tocs = Mapping[str, TocNamed]  # an eStargz layer's digest → what names its TOC


PROVING_THREADS = 4  # blobs read back at once from a registry target


class Side(Protocol):
    """One end of a mirror: a registry repository, or a layout. ``wrong``: the error of an
    answer of it that cannot be used (a registry's: exit 7; a layout's damage: exit 12)."""

    wrong: ClassVar[type[ReleaseError]]
    checks_whole: ClassVar[bool]  # ``check`` holds every blob (and TOC) whole before the copy

    @property
    def name(self) -> str: ...

    def resolve(self, tag: str) -> str | None: ...
    def get_manifest(self, reference: str) -> Manifest | None: ...
    def referrers(self, subject: str) -> list[Manifest]: ...

    # as the source
    def check(self, blobs: list[tuple[str, int]], tally: Counted, tocs: Tocs) -> None: ...
    def blocks(self, digest: str, size: int) -> Iterator[bytes]: ...
    def damaged(self, digest: str, why: str) -> ReleaseError: ...

    # as the target
    def holds(self, digest: str, size: int) -> bool: ...
    def store_blob(
        self, digest: str, size: int, blocks: Iterable[bytes], spool: Path, then: Then = None
    ) -> None:
        """``blocks`` stored as ``digest`` once proven to be it (``NotAsNamed`` if not, or if
        ``then`` names a problem once they are: ``guard.proven.write_proven``)."""

    def put_members(self, manifests: list[Manifest]) -> None: ...  # by digest, not listed
    def put_manifests(self, manifests: Listing, version_tag: str | None) -> None: ...
    def list_referrers(self, subject: Manifest, pushed: list[Manifest]) -> None: ...
    def listed(self, subject: str) -> set[str]: ...
    def prove(self, blobs: list[tuple[str, int]], tally: Counted) -> dict[str, str]: ...


@dataclass
class RegistrySide:
    client: RegistryClient
    repo: str
    wrong: ClassVar[type[ReleaseError]] = WireError

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
            if m.subject == subject:  # one of another subject is not ours to copy (a layout's too)
                out.append(m)
        return out

    # Whether ``check`` held the blobs (and eStargz layers' TOCs) whole before the copy.
    checks_whole: ClassVar[bool] = False

    def check(self, blobs: list[tuple[str, int]], tally: Counted, tocs: Tocs) -> None:
        """Nothing before the copy (reading every blob twice over the network would double the
        copy): each blob is proven as it is copied, before it is put in place, an eStargz
        layer's TOC with it."""

    def blocks(self, digest: str, size: int) -> Iterator[bytes]:
        return read_blob(self.client, self.repo, digest, COPY_BLOCK, size=size)

    def damaged(self, digest: str, why: str) -> ReleaseError:
        return WireError(f"{self.name}: blob {digest} as served {why}; nothing was copied from it")

    def holds(self, digest: str, size: int) -> bool:
        return self.client.blob_exists(self.repo, digest)  # proven after the copy: read back

    def store_blob(
        self, digest: str, size: int, blocks: Iterable[bytes], spool: Path, then: Then = None
    ) -> None:
        path = blob_file(spool, digest)  # this run's own spool: no other run writes it
        write_proven(path, digest, size, blocks, durable=False, then=then)  # uploaded, then removed
        try:
            self.client.upload_blob(self.repo, digest, path)
        finally:
            path.unlink(missing_ok=True)

    def put_members(self, manifests: list[Manifest]) -> None:
        self.put_manifests([(m, None) for m in manifests], None)

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
            ((problem, _),) = check_copies([at], digest, size, COPY_BLOCK).copies
            return problem

        with ThreadPoolExecutor(max_workers=PROVING_THREADS) as pool:
            found = list(pool.map(one, blobs))
        return {d: p for (d, _), p in zip(blobs, found, strict=True) if p is not None}


@dataclass
class LayoutSide:
    layout: Layout
    proven: dict[str, Identity] = field(default_factory=dict)  # this run's: hashed, or written
    made: bool = False  # created (and swept) by this run's first write
    wrong: ClassVar[type[ReleaseError]] = DamagedFileError

    @property
    def name(self) -> str:
        return f"oci:{self.layout.root}"

    def resolve(self, tag: str) -> str | None:
        return self.layout.resolve(tag) if self.layout.exists() else None

    def get_manifest(self, reference: str) -> Manifest | None:
        return self.layout.get_manifest(reference)

    def referrers(self, subject: str) -> list[Manifest]:
        return self.layout.referrers(subject) if self.layout.exists() else []

    checks_whole: ClassVar[bool] = True

    def check(self, blobs: list[tuple[str, int]], tally: Counted, tocs: Tocs) -> None:
        """Every blob to be copied hashed before the first write (a layout is local: reading it
        twice is cheap beside a damaged copy), an eStargz layer's bytes held against its TOC in
        the same read: one missing, of another size or hash, or whose TOC does not hold is
        damage, and the target is left as it was."""
        for digest, size in blobs:
            if not self.layout.has_blob(digest):
                raise self.damaged(digest, "is missing, or is not a regular file")
            toc = LayerCheck(dict(tocs[digest])) if digest in tocs else None
            if toc is None and self.layout.proven(digest, size) is None:
                raise self.damaged(digest, f"is not the {size} bytes that hash to its name")
            if toc is not None:
                self._hold(digest, size, toc)
            if tally is not None:
                tally.add(size)

    def _hold(self, digest: str, size: int, toc: LayerCheck) -> None:
        """The eStargz layer ``digest`` read once: hashed, and held against its TOC."""
        if not held(self.layout.blob_chunks(digest, size), digest, toc):
            raise self.damaged(digest, f"is not the {size} bytes that hash to its name")
        if problem := toc.problem:
            raise self.damaged(digest, f"is an eStargz layer whose TOC does not hold: {problem}")

    def blocks(self, digest: str, size: int) -> Iterator[bytes]:
        """The blob's bytes, bounded by ``size`` (a regular file only: never a link followed or
        a FIFO waited on; one of another size is damage)."""
        if not self.layout.has_blob(digest):
            raise self.damaged(digest, "is missing, or is not a regular file")
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

    def store_blob(
        self, digest: str, size: int, blocks: Iterable[bytes], spool: Path, then: Then = None
    ) -> None:
        self._begin()
        self.proven[digest] = self.layout.write_blob(digest, size, blocks, then)

    def put_members(self, manifests: list[Manifest]) -> None:
        self._begin()
        for m in manifests:  # blobs only: index.json lists what the index is listed by, not them
            self.layout.put_bytes(m.body)

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
