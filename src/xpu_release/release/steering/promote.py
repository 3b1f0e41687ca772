"""``promote``: a release published to one channel (a registries file: a staging namespace or
registry) copied **by digest**, with every referrer (SBOM, provenance, VEX, lifecycle, notices,
cosign's bundles and ``.att`` tag), to the endpoints of another (the current registries file:
production). No rebuild, no engine: the very bytes staging serves, proven where they land
(``mirror.py`` does the copying, registry to registry).

In the order publish keeps:

1. **refusals**, before anything is copied: staging must serve one digest at the version tag,
   the release's shape (one image, or of a platformed release an index naming each declared
   platform's image once, each served as an image of that platform: ``platformindex.py``);
   a withdrawal in force there or at a target (exit 16); a failed gate (the record's scan says failed, or an
   exception in the release's VEX was due for review before today: the gate's conclusion no
   longer holds; exit 14); a target whose version tag holds another image (exit 9);
2. **copy**: every target endpoint gets the image and its referrers by digest, no tag yet;
3. **version tags**, only once every target holds everything (a copy broken at one endpoint
   shows nowhere), each checked again at the moment of writing; then **verify** (every blob and
   every document the source lists, at every target);
4. **floating tags**, last, where publish would move them: the line rule (``line.py``), asked at
   the targets when they move (never backwards; those a withdrawn newer release left).

A rerun copies only what is missing (blobs present and proven are skipped): promotion resumes.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path

from ...errors import PublishError, ReleaseError, ReleaseWithdrawn, TagConflict, VerifyFailed, WireError
from ...errors import VulnerabilityGateFailed as GateFailed
from ...evidence.attachment import KINDS, statement
from ...evidence.lifecycle import now
from ...evidence.referrers import Referrers, fetch_attachment, list_referrers
from ...evidence.vex import vex_statements
from ...guard.shown import shown
from ...labels import INPUTS_LABEL
from ...manifest import Repo
from ...manifest.yamlsrc import Source
from ...oci.model import parse_config
from ...oci.registry import Manifest
from ...progress import Sink
from ..model import record as records
from ..model.line import Line
from ..model.plan import Target
from ..model.platformindex import platform_images, shape_problem
from ..model.pool import EndpointPool, served_release
from ..model.record import EndpointRecord, Promotion, ReleaseRecord
from ..model.withdrawn import withdrawal_in_force
from ..publishing.mirror import MirrorReport, mirror
from ..publishing.sides import RegistrySide
from ..publishing.tags import TagRules, point
from ..publishing.verify import verify


@dataclass
class Promoted:
    """What one ``promote`` did."""

    ref: str
    digest: str
    source: str  # the staging endpoint copied from
    copies: list[MirrorReport] = field(default_factory=list)
    tagged: list[str] = field(default_factory=list)  # the version refs written
    floating: tuple[str, ...] = ()
    attachments: dict[str, str] = field(default_factory=dict)  # kind → digest, as the source lists them
    config: str = ""  # the image's config digest


def source_of(staging: EndpointPool) -> tuple[RegistrySide, Manifest]:
    """The release as staging serves it (``served_release``), and where to copy it from."""
    nothing = f"no endpoint of the staging registries serves {staging.spec.ref}: release it there first"
    found = served_release(staging, nothing=nothing).source
    assert found is not None  # asked of the endpoints, not of a record
    ep, image = found
    return RegistrySide(staging.client(ep), staging.repo(ep)), image


def not_withdrawn(staging: EndpointPool, target: EndpointPool, digest: str, *, then: str) -> None:
    """Refused (exit 16) when a withdrawal of ``digest`` is in force at any staging endpoint or at
    any target; an endpoint that cannot say fails closed (``withdrawn.py``)."""
    ref = target.spec.ref
    withdrawn = withdrawal_in_force(staging, digest, then=then) or withdrawal_in_force(
        target, digest, then=then
    )
    if withdrawn is not None:
        msg = f"{ref} is {withdrawn.words()}; {then} (`xpu-release reinstate {ref}` undoes the withdrawal)"
        raise ReleaseWithdrawn(msg)


def refusals(
    source: RegistrySide, image: Manifest, record: ReleaseRecord | None, today: date, target: EndpointPool
) -> None:
    """The image staging serves is the recorded release, served as a release of its platforms
    is (exit 7), and its gate did not fail and still holds (exit 14)."""
    ref = target.spec.ref
    if record is not None and record.digest != image.digest:
        msg = (f"{ref}: staging serves {image.digest} at its version tag, but the release record says "
               f"{record.digest} was tested and published; nothing was promoted (an image that is not the "
               "tested release is never promoted: release it again, or promote with the --record of "
               "the release staging serves)")  # fmt: skip
        raise VerifyFailed(msg)
    problem = shape_problem(image, target.spec)
    wrong = [f"{image.digest} {problem}"] if problem else []
    if image.is_index and not problem:
        wrong = [f"{what}: {why}" for what, why in platform_images(source.client, source.repo, image,
                                                                   target.spec.platforms)[0]]  # fmt: skip
    if wrong:
        msg = "\n".join([f"{ref}: staging does not serve it as it is released; nothing was promoted:",
                         *(f"  {source.name}: {w}" for w in wrong)])  # fmt: skip
        raise VerifyFailed(msg)
    if record is not None and (record.scan or {}).get("status") == "failed":
        msg = f"{ref} failed its vulnerability gate (its release record says so); nothing was promoted"
        raise GateFailed(msg)
    # the VEX of the image; of an index, each platform image's own
    horizon = target.spec.review_horizon_days
    listed = [
        list_referrers(source.client, source.repo, d)
        for d in (image.digest, *(m.digest for m in image.manifests))
    ]
    reviews = [r for found in listed for r in _reviews(source, found, today, horizon)]
    for due, vulnerability in reviews:
        if due < today:
            named = shown(vulnerability, 80)
            msg = (f"{ref}: the exception for {named} in its VEX was due for review on {due}; "
                   "the gate's conclusion no longer holds: review it and release again. Nothing was "
                   "promoted")  # fmt: skip
            raise GateFailed(msg)


def _reviews(source: RegistrySide, found: Referrers, today: date, horizon: int) -> list[tuple[date, str]]:
    """(review_by, vulnerability) of each exception in every VEX staging lists for the image (none:
    no VEX), read as the VEX file is (``evidence/vex``, the review horizon included); a VEX that is
    not one is refused (exit 14)."""
    out = []
    for desc in found.ours("vex"):
        doc = statement(fetch_attachment(source.client, source.repo, desc, "vex").payload) or {}
        src = Source(file=f"{source.name}: the VEX {desc.digest[:19]}", data=doc.get("predicate"))
        statements, problems = vex_statements(src, today=today, horizon_days=horizon)
        if problems:
            said = "\n".join(f"  {p}" for p in problems[:10])
            msg = (f"the VEX staging serves is not one, so the gate's conclusion cannot be checked; "
                   f"nothing was promoted:\n{said}")  # fmt: skip
            raise GateFailed(msg)
        out += [(s.review_by, s.vulnerability) for s in statements if s.review_by is not None]
    return out


def conflicts(target: EndpointPool, digest: str, targets: tuple[Target, ...] | None = None) -> None:
    """Every target's version tag (of ``targets``, default all) holds nothing or this image, or
    nothing is copied (exit 9)."""
    found = []
    for t in targets or target.plan.targets:
        held = target.client(t.endpoint).head_manifest(target.repo(t.endpoint), target.spec.version)
        if held is not None and held != digest:
            found.append(f"  {t.version_ref}: holds {held}")
    if found:
        head = f"{target.spec.ref} is another image at the target; version tags are immutable:"
        msg = "\n".join([head, *found, f"nothing was promoted (staging serves {digest})"])
        raise TagConflict(msg)


def promote(
    staging: EndpointPool, target: EndpointPool, *, spool: Path, record: ReleaseRecord | None, today: date,
    line: Line, on_line: Sink = lambda _: None,
) -> Promoted:  # fmt: skip
    """Copy ``staging.spec``'s release from the staging endpoints to ``target``'s; see above.
    ``line``: the line rule, asked at the target when the floating tags move (as publish asks it)."""
    spec = target.spec
    source, image = source_of(staging)
    not_withdrawn(staging, target, image.digest, then="nothing was promoted")
    refusals(source, image, record, today, target)
    conflicts(target, image.digest)
    found = list_referrers(source.client, source.repo, image.digest)
    attachments = found.firsts()
    # What verify will require at the targets, required of staging before anything is copied: a
    # release that cannot verify there is refused here, with nothing changed (exit 7).
    missing = [k for k in (("provenance",) if image.is_index else KINDS) if k not in attachments]
    if missing:
        msg = (f"{spec.ref}: staging serves {image.digest} without its {' and '.join(missing)} (a release "
               "carries its evidence); nothing was promoted: publish it to staging again")  # fmt: skip
        raise VerifyFailed(msg)
    out = Promoted(ref=spec.ref, digest=image.digest, source=source.name, config=image.config_digest or "",
                   attachments=attachments)  # fmt: skip

    def copy(t: Target) -> MirrorReport:  # a client of its own at each end, in its own thread
        src = RegistrySide(staging.client(source.client.endpoint, fresh=True), source.repo)
        dst = RegistrySide(target.client(t.endpoint, fresh=True), target.repo(t.endpoint))
        return mirror(src, dst, spec.version, spool, on_line, tag_it=False)

    with ThreadPoolExecutor(max_workers=min(8, len(target.plan.targets))) as ex:
        out.copies = list(ex.map(copy, target.plan.targets))
    problems = [p for r in out.copies for p in r.problems]
    if problems:
        raise PublishError("\n".join([f"{spec.ref} is not promoted everywhere (no version tag was written); "
                                      "rerun to finish:", *(f"  {p}" for p in problems)]))  # fmt: skip
    for t in target.plan.targets:  # tags last, each held to immutability at the moment of writing
        conflicts(target, image.digest, (t,))
        point(target.client(t.endpoint), target.repo(t.endpoint), spec.version, image, t.version_ref)
        out.tagged.append(t.version_ref)
    report = verify(target, image.digest, deep=False, attachments=out.attachments, on_line=on_line)
    if not report.ok:
        lines = [f"  {f.endpoint:<22} {f.what}: {f.problem}" for f in report.findings]
        raise VerifyFailed("\n".join([f"{spec.ref}: promoted, but the targets do not verify:", *lines]))
    # asked again right before, and right after: a withdraw may run meanwhile
    not_withdrawn(staging, target, image.digest, then="no floating tag was moved")
    tags = TagRules(spec, target, None, allow_overwrite=False, workers=1, on_line=on_line)
    out.floating = line.move(target, tags, image)
    if out.floating:
        try:
            not_withdrawn(
                staging, target, image.digest, then=f"it was withdrawn while {', '.join(out.floating)} moved"
            )
        except ReleaseWithdrawn as exc:
            msg = (f"{exc.message}. Rerun `xpu-release withdraw {spec.ref} --reason ...` to move "
                   "the floating tags off it (a rerun keeps the first reason)")  # fmt: skip
            raise ReleaseWithdrawn(msg) from exc
    return out


@dataclass(frozen=True)
class Recording:
    """Where a promotion is recorded: the release record at ``path`` (inside the repository
    ``root``), naming the channel it went to and the registries file it came from."""

    path: Path
    root: Path
    channel: str
    source: str


def promote_recorded(
    repo: Repo, staging: EndpointPool, target: EndpointPool, into: Recording, *, spool: Path, on_line: Sink
) -> Promoted:
    """``promote``, its record checked writable before any endpoint changes and written after:
    the record of the release with this promotion added, or one made from what the registries
    say when this runner has no record of that digest."""
    record = records.writable(into.path, target.spec.ref, into.root)
    with target.metering():
        done = promote(staging, target, spool=spool, record=record, today=date.today(),
                       line=Line(repo), on_line=on_line)  # fmt: skip
    fresh = record is None or record.digest != done.digest
    written = recorded(done, record, target, source=into.source, channel=into.channel, at=now(),
                       inputs=inputs_of(target, done.config) if fresh else "")  # fmt: skip
    records.write(written, into.path, into.root)
    return done


def recorded(
    done: Promoted, record: ReleaseRecord | None, target: EndpointPool, *, source: str, channel: str, at: str,
    inputs: str = "",
) -> ReleaseRecord:  # fmt: skip
    """The release record after ``done``: the record of the release (its publish to staging)
    with this promotion added; with no record of this digest here (another runner), one made
    from what the registries say, whose endpoints are the promotion's."""
    names = tuple(t.endpoint.name for t in target.plan.targets)
    entry = Promotion(source=source, channel=channel, endpoints=names, at=at)
    if record is not None and record.digest == done.digest:
        kept = tuple(p for p in record.promotions if (p.source, p.channel) != (source, channel))
        return replace(record, promotions=(*kept, entry))
    spec = target.spec
    endpoints = tuple(
        EndpointRecord(endpoint=t.endpoint.name, host=t.endpoint.host, version_ref=t.version_ref,
                       floating_refs=t.floating_refs, status="verified", digest=done.digest, verified_at=at)
        for t in target.plan.targets
    )  # fmt: skip
    return ReleaseRecord(
        ref=spec.ref, manifest=spec.manifest_path, manifest_sha256=spec.content_hash, inputs_sha256=inputs,
        tested_image_id=done.config, digest=done.digest, published_at=at, complete=True,
        floating_moved=done.floating, endpoints=endpoints, attachments=dict(done.attachments),
        promotions=(entry,),
    )  # fmt: skip


def inputs_of(pool: EndpointPool, config: str) -> str:
    """The inputs digest the image's config carries (its label), for a record made here."""
    for t in pool.plan.targets:
        what = f"{t.endpoint.name}: the config {config[:19]}"
        try:
            raw = pool.client(t.endpoint).blob_bytes(pool.repo(t.endpoint), config, limit=1 << 20)
            return parse_config(raw, what=what, error=WireError).labels.get(INPUTS_LABEL, "")
        except ReleaseError:
            continue
    return ""
