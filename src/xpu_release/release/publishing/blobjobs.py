"""The blobs ``verify`` checks at each endpoint (``Job``): present at their size (shallow), or
read from every endpoint, hashed once and the copies compared (deep, ``oci.blobcheck``), an
eStargz layer's bytes held against its TOC as they pass (``oci.toc``)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

from ...errors import ReleaseError
from ...oci.blobcheck import Checked, Source, check_copies
from ...oci.endpoint import Endpoint
from ...oci.model import ImageManifest
from ...oci.registry import Manifest, RegistryClient
from ...oci.toc import LayerCheck, TocNamed, toc_named
from ...progress import Tally

CHUNK = 1 << 20


class Job(NamedTuple):
    """One blob to check at one endpoint."""

    endpoint: Endpoint
    client: RegistryClient
    repo: str
    digest: str
    size: int
    # An eStargz layer's annotations: deep, its TOC is held against its bytes too (``oci/toc``).
    toc: TocNamed = ()


def image_jobs(ep: Endpoint, client: RegistryClient, repo: str, manifest: Manifest) -> list[Job]:
    """The blobs of an image manifest to check at ``ep``: its config and layers (none of an index)."""
    view = manifest.view
    if not isinstance(view, ImageManifest):
        return []
    return [
        Job(
            ep,
            client,
            repo,
            d.digest,
            d.size,
            toc_named(d.annotations),
        )
        for d in view.blobs()
    ]


@dataclass(frozen=True, kw_only=True)
class Finding:
    endpoint: str
    what: str  # the ref or the blob digest
    problem: str
    down: bool = False  # the endpoint did not answer (``errors.is_down``), rather than answered wrong


def in_step(blobs: list[tuple[str, int]]) -> list[list[int]]:
    """The jobs (each a blob at one endpoint: digest and size) as groups of indexes read in step:
    one group a blob, so each blob's bytes are hashed once however many endpoints hold it. (Its
    copies split over two groups, to keep both cores busy when one layer is nearly the whole
    image, measured slower on this 2-core runner: bench/verify.py --size 4GB --one-layer.)"""
    by_blob: dict[tuple[str, int], list[int]] = {}
    for i, blob in enumerate(blobs):
        by_blob.setdefault(blob, []).append(i)
    return list(by_blob.values())


def _present(client: RegistryClient, repo: str, digest: str, size: int) -> str | None:
    """A problem with one blob at one endpoint, by HEAD (None: it is there, of the size listed)."""
    length = client.blob_size(repo, digest)
    if length is None:
        return "missing"
    if length >= 0 and length != size:
        return f"has {length} bytes, the manifest lists {size}"
    return None


PARALLEL = 8  # blobs checked at once


def _toc_said(
    named: set[TocNamed], toc: LayerCheck | None, checked: Checked,
    sources: list[Source], digest: str, size: int,
) -> str | None:  # fmt: skip
    """What is wrong with the eStargz TOC a blob is named with (None: it holds, or it is no
    eStargz layer). Its verdict is of the blob when the bytes it read are the blob's; when the
    copies in step were not (the first endpoint's copy damaged), it is held again against an
    intact copy, so one endpoint's damage never hides the others' lie."""
    if len(named) > 1:
        return "it is named with more than one eStargz TOC (the manifests disagree): at most one holds"
    if toc is None:
        return None
    if checked.shared != digest:
        intact = [s for s, (problem, _) in zip(sources, checked.copies, strict=True) if problem is None]
        if not intact:
            return None  # no endpoint has the blob: each says so already
        toc = LayerCheck(toc.annotations)
        if check_copies(intact[:1], digest, size, CHUNK, also=toc.feed).shared != digest:
            return None  # it changed since: the copy's own finding is the next run's
    lies = toc.problem
    return f"its eStargz TOC does not hold: {lies}" if lies else None


def check_blobs(jobs: list[Job], deep: bool) -> tuple[list[Finding], int]:
    """Each blob of ``jobs`` present at its endpoint at its size (``deep``: hashed, each blob once
    at every endpoint that lists it, the copies compared); the findings and the bytes hashed."""
    tallies: dict[str, Tally] = {}
    for job in jobs:
        tally = tallies.setdefault(job.endpoint.name, Tally(f"hashing at {job.endpoint.name}", 0))
        tally.total = (tally.total or 0) + job.size

    def finding(job: Job, problem: str | None) -> Finding | None:
        return Finding(endpoint=job.endpoint.name, what=job.digest, problem=problem) if problem else None

    def shallow(group: list[Job]) -> list[tuple[Finding | None, int]]:
        (job,) = group
        try:
            problem = _present(job.client, job.repo, job.digest, job.size)
        except ReleaseError as exc:
            problem = exc.message
        return [(finding(job, problem), 0)]

    def everywhere(group: list[Job]) -> list[tuple[Finding | None, int]]:
        """One blob at every endpoint that lists it: hashed once, the copies compared with it; of
        an eStargz layer, the bytes held against its TOC as they pass (``oci/toc``)."""
        digest, size = group[0].digest, group[0].size
        sources = [Source(job.client, job.repo, tallies[job.endpoint.name].add) for job in group]
        named = {job.toc for job in group if job.toc}  # every TOC a manifest names it with
        toc = LayerCheck(dict(next(iter(named)))) if len(named) == 1 else None
        checked = check_copies(sources, digest, size, CHUNK, also=toc.feed if toc else None)
        said = _toc_said(named, toc, checked, sources, digest, size)
        return [
            (finding(job, problem or said), got)
            for job, (problem, got) in zip(group, checked.copies, strict=True)
        ]

    groups = in_step([(job.digest, job.size) for job in jobs]) if deep else [[i] for i in range(len(jobs))]
    results: list[tuple[Finding | None, int]] = [(None, 0)] * len(jobs)
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        checks = pool.map(everywhere if deep else shallow, [[jobs[i] for i in g] for g in groups])
        for group, checked in zip(groups, checks, strict=True):
            for i, result in zip(group, checked, strict=True):
                results[i] = result  # in the endpoints' order, as the jobs were listed
    return [f for f, _ in results if f is not None], sum(got for _, got in results)
