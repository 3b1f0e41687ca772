"""The documents a publish attaches: this run's SBOM and provenance, or what the first endpoint
already holds where it is provably the same (``evidence.reuse.choose``): never a document found
at an endpoint signed as found."""

from __future__ import annotations

from ...errors import ReleaseError
from ...evidence.attachment import END_OF_LIFE_ANNOTATION, Attachment
from ...evidence.attest import Documents, IndexDocuments
from ...evidence.cosign import bundles_for
from ...evidence.referrers import fetch_attachment, list_referrers
from ...evidence.reuse import choose
from ...evidence.scan import ScanResult
from ...evidence.signing import Signer
from ...evidence.vexdoc import ReleaseVex, release_vex
from ...guard.shown import shown
from ...manifest import ImageSpec, Repo
from ...oci.registry import Manifest, RegistryClient
from ...progress import Sink
from ..model.pool import EndpointPool
from ..run.notes import previous_spec, scanned_findings


def documents_for(
    client: RegistryClient, repo: str, where: str, documents: Documents | IndexDocuments, source: Manifest,
    signer: Signer | None, on_line: Sink,
) -> tuple[Attachment, ...]:  # fmt: skip
    """The SBOM and the provenance (and the VEX, after a gate) to attach to ``source``
    everywhere, one of each per image.
    Both are made from this run's inputs; what the first endpoint (``client``, ``repo``)
    already holds (an earlier or interrupted run) is outside data, reused only where
    ``choose`` proves it the same, and never signed as found."""
    found = list_referrers(client, repo, source.digest)
    run_known = documents.run_known()
    out: list[Attachment] = []
    for kind in documents.kinds:
        earlier: Attachment | None = None
        if found.ours(kind):
            try:
                earlier = fetch_attachment(client, repo, found.ours(kind)[0], kind)
            except ReleaseError as exc:
                on_line(f"{where}: the attached {kind} is unusable ({exc.message}); making it again")
        if earlier is None:
            on_line(f"making the {kind} of {source.digest[:19]}")
        ours = documents.make(kind, source.digest)
        choice = choose(ours, earlier, signer, run_known=run_known)
        if choice.replaced:
            on_line(f"{where}: the attached {kind} is not reused: {choice.replaced}; "
                         "attaching this run's")  # fmt: skip
        out.append(choice.attachment)
    if signer is not None:  # cosign's bundle of each signed statement: the same envelope, wrapped
        out += bundles_for(tuple(out), signer.verifier())
    return tuple(out)


def gate_vex(repo: Repo, spec: ImageSpec, result: ScanResult | None) -> ReleaseVex | None:
    """The release's VEX, when its gate ran: the exceptions that apply to ``result``, and
    ``fixed`` for what the release this one extends had on record and this one does not."""
    if result is None:
        return None
    previous = previous_spec(repo, spec)
    earlier = scanned_findings(repo, previous) if previous is not None else None
    return release_vex(result, earlier.values() if earlier else None)


def dates_still_stated(pool: EndpointPool, digest: str) -> dict[str, str]:
    """Endpoint → the end-of-life date a lifecycle document attached to ``digest`` states there,
    for a release whose manifest no longer gives a date: nothing is deleted (a registry with the
    referrers API lists every referrer it ever got), so the registries keep stating it and
    ``publish`` says so. An endpoint that does not answer is left out (this only warns)."""
    out: dict[str, str] = {}
    for t in pool.plan.targets:
        try:
            found = list_referrers(pool.client(t.endpoint), pool.repo(t.endpoint), digest).ours("lifecycle")
        except ReleaseError:
            continue
        dates = sorted({d.annotations.get(END_OF_LIFE_ANNOTATION, "?")[:10] for d in found})
        if dates:
            out[t.endpoint.name] = ", ".join(shown(d, 10) for d in dates)
    return out
