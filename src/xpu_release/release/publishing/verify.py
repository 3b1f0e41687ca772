"""``verify``: does every endpoint serve the release, blob for blob?

Two levels, as the README's reliability section says:

- shallow (the release's verify stage): each endpoint's version tag names the release's
  manifest digest, and every blob that manifest lists exists there with the size it lists
  (HEAD requests: a few per blob, no bytes);
- deep (``verify --deep``): every blob is downloaded from every endpoint, blobs in parallel,
  streamed, and each endpoint's copy shown to hash to the digest: the copies of one blob are read
  in step, the first hashed and the others compared with it (``oci.blobcheck``; a copy that differs
  is hashed on its own), so the bytes are hashed once, not once an endpoint. Memory stays at one
  chunk per copy being read: a flipped byte in a stored blob is found, named by endpoint and
  digest.

At both levels the image's attachments (SBOM, provenance, and the VEX of a release whose gate
ran) are checked the same way: each
endpoint's referrers of the image list the very artifact manifests the record names (with no
record: those the first endpoint lists), and their blobs are checked like the image's.

Neither re-reads what the record says: both ask the endpoints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...errors import ReleaseError, is_down
from ...evidence.attachment import (
    ALL_KINDS,
    BUNDLED,
    BUNDLES,
    KINDS,
    PREDICATES,
    SIGNED_KINDS,
    Attachment,
    Kind,
)
from ...evidence.cosign import PREDICATE_TYPE_ANNOTATION, SIGNATURE_ANNOTATION, att_tag, envelope_of, key_hint
from ...evidence.lifecycle import in_force, notices_in
from ...evidence.referrers import Referrers, attachment_of, list_referrers
from ...evidence.signing import Verifier, open_envelope
from ...guard.reading import loads
from ...guard.shown import shown
from ...manifest.platforms import Platform
from ...oci.registry import Manifest, RegistryClient
from ...progress import Sink
from ..model.plan import Target
from ..model.platformindex import platform_images, shape_problem
from ..model.pool import EndpointPool
from .blobjobs import Finding, Job, check_blobs, image_jobs


@dataclass(frozen=True, kw_only=True)
class VerifyReport:
    ref: str
    digest: str | None
    deep: bool
    endpoints: int
    blobs_checked: int
    bytes_hashed: int
    findings: tuple[Finding, ...]
    # Not a finding: the withdrawals in force at some endpoint, as a person reads them.
    withdrawn: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.findings


def _attachments(
    client: RegistryClient,
    repo: str,
    found: Referrers,
    expected: dict[str, str],
    key: Verifier | None = None,
    required: tuple[Kind, ...] = KINDS,
) -> tuple[list[tuple[str, str]], list[tuple[str, int]]]:
    """Problems with the attachments at one endpoint, and the blobs to check like the image's.
    With ``key``: the provenance (and the VEX) must be an envelope it signed, about the image it
    is attached to, in each of cosign's layouts too (its bundle, its ``.att`` tag). ``required``:
    what must be attached (an image index has a provenance of its own, no SBOM)."""
    if not expected:
        return [("attachments", "no SBOM and no provenance are attached to the image")], []
    problems: list[tuple[str, str]] = []
    blobs: list[tuple[str, int]] = []
    envelopes: dict[Kind, str] = {}  # a signed statement's envelope digest
    subject = ""
    for kind in ALL_KINDS:
        want = expected.get(kind)
        listed = [d.digest for d in found.ours(kind)]
        if want is None and kind not in required:
            continue  # the VEX, the bundles: only a release with a gate, a key
        if want is None:
            problems.append((kind, "not attached at the first endpoint, so not expected anywhere"))
        elif want not in listed:
            has = f"lists {', '.join(listed)}" if listed else f"lists no {kind}"
            problems.append((kind, f"the referrers of the image ({found.via}) {has}, not {want}"))
        else:
            manifest = client.get_manifest(repo, want)
            if manifest is None:
                problems.append((kind, f"{want} is listed but not served"))
                continue
            blobs += manifest.blobs()
            subject = subject or manifest.subject
            if (kind in SIGNED_KINDS or kind in BUNDLED) and key is not None:
                document = attachment_of(client, repo, manifest, kind)
                if kind in BUNDLES:  # cosign's layouts hold it too
                    envelopes[kind] = document.digest
                problems += _signature(document, manifest, key)
    if envelopes and key is not None:
        att, att_blobs = _att(client, repo, subject, envelopes)
        problems += att
        blobs += att_blobs
    return problems, blobs


def _signature(document: Attachment, manifest: Manifest, key: Verifier) -> list[tuple[str, str]]:
    """A signed statement (or cosign's bundle of one) verifies with ``key`` and is about the
    image its artifact manifest refers to."""
    kind, payload = document.kind, document.payload
    subject = manifest.subject
    if kind in BUNDLED:
        material = _json(payload).get("verificationMaterial")
        public = material.get("publicKey") if isinstance(material, dict) else None
        hint = public.get("hint") if isinstance(public, dict) else None
        if hint != key_hint(key):
            return [
                (
                    kind,
                    f"{manifest.digest}: the bundle names key hint {shown(repr(hint), 80)}, not this key's",
                )
            ]
        payload = envelope_of(payload) or b""
    try:
        statement = open_envelope(payload, key, manifest.digest, kind)
    except ReleaseError as exc:
        return [(kind, exc.message)]
    subjects = statement.get("subject")
    about = [
        "sha256:" + str((s.get("digest") or {}).get("sha256", ""))
        for s in (subjects if isinstance(subjects, list) else [])
        if isinstance(s, dict) and isinstance(s.get("digest") or {}, dict)
    ]
    if subject not in about:
        return [(kind, f"signed, but about {', '.join(about) or 'nothing'}, not {subject}")]
    return []


def _json(data: bytes) -> dict[str, Any]:
    try:
        out = loads(data)
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def _att(client: RegistryClient, repo: str, subject: str, envelopes: dict[Kind, str]) -> tuple[
    list[tuple[str, str]], list[tuple[str, int]]
]:  # fmt: skip
    """cosign's ``.att`` tag holds each signed statement's envelope (the very bytes verified as
    the referrer's), annotated as cosign reads it."""
    tag = att_tag(subject)
    manifest = client.get_manifest(repo, tag)
    if manifest is None:
        return [(".att", f"cosign's tag {tag} is missing")], []
    layers = {x.digest: x for x in manifest.layers}
    problems = []
    for kind, digest in envelopes.items():
        notes = layers[digest].annotations if digest in layers else {}
        if digest not in layers:
            problems.append((".att", f"{tag} does not hold the {kind} envelope {digest}"))
        elif notes.get(PREDICATE_TYPE_ANNOTATION) != PREDICATES[kind] or SIGNATURE_ANNOTATION not in notes:
            problems.append((".att", f"{tag}: the {kind} layer lacks cosign's annotations"))
    return problems, manifest.blobs()


def _platform_images(
    at: Job, index: Manifest, platforms: tuple[Platform, ...], attached: dict[str, dict[str, str]],
    key: Verifier | None,
) -> tuple[list[Finding], list[Job]]:  # fmt: skip
    """The index ``at`` serves as an index of each declared platform's image (``platformindex``:
    each named once, nothing else, of its size, its config saying its platform), and each of
    those images served there: its blobs and its own attachments (checked as the release's are);
    ``attached`` learns a platform's from the first endpoint that shows them."""
    ep, client, repo = at.endpoint, at.client, at.repo
    problems, images = platform_images(client, repo, index, platforms)
    findings = [Finding(endpoint=ep.name, what=what, problem=p) for what, p in problems]
    jobs: list[Job] = []
    for platform, image in images:
        try:
            found = list_referrers(client, repo, image.digest)
            want = attached.setdefault(platform.name, found.firsts())
            problems, blobs = _attachments(client, repo, found, want, key)
        except ReleaseError as exc:
            findings.append(Finding(endpoint=ep.name, what=f"{platform} image", problem=exc.message))
            continue
        findings += [Finding(endpoint=ep.name, what=f"{platform} {w}", problem=p) for w, p in problems]
        jobs += image_jobs(ep, client, repo, image) + [Job(ep, client, repo, d, size) for d, size in blobs]
    return findings, jobs


def verify(
    endpoints: EndpointPool,
    digest: str | None,
    *,
    deep: bool,
    attachments: dict[str, str] | None = None,
    key: Verifier | None = None,
    on_line: Sink = lambda _: None,
    platforms: dict[str, dict[str, str]] | None = None,
) -> VerifyReport:
    """Check every endpoint against ``digest`` (None: against what the first endpoint serves),
    and its attachments against ``attachments`` (kind → artifact manifest digest; None: those
    of the first endpoint). Of a platformed release, the index and each declared platform's
    image it names, with that image's own attachments (``platforms``: the record's, platform →
    kind → artifact manifest digest; a platform not in it: those of the first endpoint)."""
    survey = _Survey(endpoints, digest, attachments, key, platforms)
    for t in endpoints.plan.targets:
        survey.endpoint(t)
    jobs = survey.jobs
    on_line(
        f"{'hashing' if deep else 'checking'} {len(jobs)} blobs at {len(endpoints.plan.targets)} endpoints"
    )
    found, hashed_total = check_blobs(jobs, deep)
    return VerifyReport(
        ref=endpoints.spec.ref,
        digest=survey.expected,
        deep=deep,
        endpoints=len(endpoints.plan.targets),
        blobs_checked=len(jobs),
        bytes_hashed=hashed_total,
        findings=(*survey.findings, *found),
        withdrawn=tuple(survey.withdrawn),
    )


class _Survey:
    """What each endpoint serves at the version tag, its attachments and notices, and the blobs
    to check there (``jobs``)."""

    def __init__(self, endpoints: EndpointPool, digest: str | None, attachments: dict[str, str] | None,
                 key: Verifier | None, platforms: dict[str, dict[str, str]] | None) -> None:  # fmt: skip
        self.pool, self.expected, self.key = endpoints, digest, key
        self.attached = dict(attachments) if attachments is not None else None
        self.by_platform = {k: dict(v) for k, v in (platforms or {}).items()}
        self.findings: list[Finding] = []
        self.jobs: list[Job] = []
        self.withdrawn: dict[str, None] = {}

    def endpoint(self, t: Target) -> None:
        ep, spec = t.endpoint, self.pool.spec
        client, repo = self.pool.client(ep), self.pool.repo(ep)
        manifest = self._served(t, client, repo)
        if manifest is None:
            return
        self.jobs += image_jobs(ep, client, repo, manifest)
        try:
            found = list_referrers(client, repo, manifest.digest)
            if self.attached is None:
                self.attached = found.firsts()
            required: tuple[Kind, ...] = ("provenance",) if manifest.is_index else KINDS
            problems, blobs = _attachments(client, repo, found, self.attached, self.key, required)
            self.withdrawn.update(dict.fromkeys(n.words() for n in in_force(notices_in(client, repo, found))))
        except ReleaseError as exc:
            self.findings.append(Finding(endpoint=ep.name, what="attachments", problem=exc.message))
            return
        self.findings += [Finding(endpoint=ep.name, what=what, problem=p) for what, p in problems]
        self.jobs += [Job(ep, client, repo, d, size) for d, size in blobs]
        if manifest.is_index:
            top = Job(ep, client, repo, manifest.digest, 0)
            found_images, platform_jobs = _platform_images(
                top, manifest, spec.platforms, self.by_platform, self.key
            )
            self.findings += found_images
            self.jobs += platform_jobs

    def _served(self, t: Target, client: RegistryClient, repo: str) -> Manifest | None:
        """The release as ``t``'s endpoint serves it at the version tag (None: a finding says why not)."""
        ep = t.endpoint
        try:
            manifest: Manifest | None = client.get_manifest(repo, self.pool.spec.version)
        except ReleaseError as exc:
            self.findings.append(Finding(endpoint=ep.name, what=t.version_ref, problem=exc.message,
                                         down=is_down(exc)))  # fmt: skip
            return None
        if manifest is None:
            problem: str | None = "serves nothing"
        else:
            self.expected = self.expected or manifest.digest
            wrong = manifest.digest != self.expected
            problem = (
                f"serves {manifest.digest}, not {self.expected}"
                if wrong
                else shape_problem(manifest, self.pool.spec)
            )
        if problem is not None:
            self.findings.append(Finding(endpoint=ep.name, what=t.version_ref, problem=problem))
            return None
        return manifest
