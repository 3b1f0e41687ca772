"""Which document a publish attaches: the one this run made, or one an endpoint already holds
when it is provably the same. A found document is outside data: the release key signs only
what this run made from its own inputs, never a document as found."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..guard.reading import loads
from ..guard.shown import shown
from .attachment import SIGNED_KINDS, Attachment
from .signing import ENVELOPE_TYPE, Signer, envelope, names_no_key, signed_by, statement_of

# Facts of one build run that a publishing runner may not know (another runner built the same
# image id, or it was pulled by build avoidance): the only fields a found statement may differ
# in from this run's, and only when our own key already signed it.
RUN_FACTS: tuple[tuple[str, ...], ...] = (
    ("predicate", "runDetails", "builder", "id"),
    ("predicate", "runDetails", "metadata", "startedOn"),
    ("predicate", "runDetails", "metadata", "finishedOn"),
)


@dataclass(frozen=True, kw_only=True)
class Choice:
    """The document to attach, and why a document found at an endpoint was not reused (None:
    it was, or none was found)."""

    attachment: Attachment
    replaced: str | None = None


def _without_run_facts(statement: Any) -> Any:
    if not isinstance(statement, dict):
        return statement
    out = json.loads(json.dumps(statement))
    for path in RUN_FACTS:
        node = out
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)
    return out


def _without_the_manifest_file(statement: Any) -> Any:
    """The statement but the sha256 of the manifest's file, which an edit that changes nothing
    built (a support date, a comment) changes; what was built from it stays, as the resolved
    manifest's hash (``resolvedManifestSha256``)."""
    if not isinstance(statement, dict):
        return statement
    out = json.loads(json.dumps(statement))
    build = (
        (out.get("predicate") or {}).get("buildDefinition")
        if isinstance(out.get("predicate"), dict)
        else None
    )
    if not isinstance(build, dict):
        return out
    if isinstance(build.get("externalParameters"), dict):
        build["externalParameters"].pop("manifestSha256", None)
    for dep in build.get("resolvedDependencies") or []:
        if isinstance(dep, dict) and dep.get("name") == "manifest":
            dep.pop("digest", None)
    return out


def _differences(found: Any, ours: Any, where: str = "") -> list[str]:
    """The dotted paths at which two JSON values differ (the first few)."""
    if isinstance(found, dict) and isinstance(ours, dict):
        out: list[str] = []
        for key in sorted(set(found) | set(ours), key=str):
            out += _differences(found.get(key), ours.get(key), f"{where}.{key}" if where else str(key))
        return out
    return [] if found == ours else [where or "(the whole statement)"]


def _as_cosign_reads(found: Attachment, statement: bytes, signer: Signer | None) -> Attachment:
    """``found``, an envelope our key signed, as it is; or, when its signatures name a key id
    (earlier releases wrote ``sha256:<hex>``, which cosign's bundle verifier skips), the same
    statement in our envelope again: our key signed it before, so it is ours to sign (an Ed25519
    signature comes out the same)."""
    if signer is None or names_no_key(found.payload):
        return found
    return Attachment(kind=found.kind, payload=envelope(statement, signer), media_type=ENVELOPE_TYPE)


def choose(ours: Attachment, found: Attachment | None, signer: Signer | None, *, run_known: bool) -> Choice:
    """What to attach, given ``ours`` (what this run makes from its own inputs: the SBOM, or the
    provenance's unsigned statement) and ``found`` (what an endpoint already holds, outside
    data). The release key signs only ``ours``; a found document is reused only when it is
    provably the same:

    - an SBOM, when it is byte for byte the one this image gives;
    - a VEX, when its statement is byte for byte this run's (as found when unsigned or signed
      by our key);
    - a provenance, when its statement is byte for byte this run's (kept as found when
      unsigned or signed by our key, so an ECDSA envelope is not remade); or when it differs
      only in the build run's facts (builder, start and finish) and our own key signed it, or,
      with no key, when this runner does not know the run it came from; or when it differs
      only in the sha256 of the manifest's file (the same resolved manifest: an edit of what
      is never built, such as a support date) and our own key signed it, or there is no key.
    Anything else is replaced by this run's document, signed when there is a key."""
    mine = ours
    if ours.kind in SIGNED_KINDS and signer is not None:
        mine = Attachment(kind=ours.kind, payload=envelope(ours.payload, signer), media_type=ENVELOPE_TYPE)
    if found is None:
        return Choice(attachment=mine)
    if ours.kind not in SIGNED_KINDS:
        if found.payload == ours.payload and found.layer_type == ours.layer_type:
            return Choice(attachment=found)
        return Choice(attachment=mine, replaced=f"it is not the {ours.kind} this image gives")
    statement = statement_of(found.payload)
    if statement is None:
        return Choice(
            attachment=mine, replaced="it is neither an in-toto statement nor a DSSE envelope of one"
        )
    return _by_statement(ours, mine, found, statement, signer, run_known=run_known)


def _by_statement(
    ours: Attachment, mine: Attachment, found: Attachment, statement: bytes, signer: Signer | None,
    *, run_known: bool,
) -> Choice:  # fmt: skip
    """``choose``'s rules for a found VEX or provenance that holds an in-toto ``statement``
    (``mine``: ours as it is attached, signed when there is a key)."""
    by_our_key = signer is not None and signed_by(found.payload, signer.verifier())
    if statement == ours.payload:
        return Choice(attachment=_as_cosign_reads(found, statement, signer) if by_our_key
                      else found if signer is None else mine)  # fmt: skip
    try:
        theirs: Any = loads(statement)
    except ValueError:
        return Choice(attachment=mine, replaced="its statement is not JSON")
    own = json.loads(ours.payload)
    differ = _differences(_without_run_facts(theirs), _without_run_facts(own))
    same_build = not _differences(_without_the_manifest_file(theirs), _without_the_manifest_file(own))
    if differ and same_build and (by_our_key or signer is None):
        # The same build, described when the manifest's file read otherwise (its support date).
        return Choice(attachment=_as_cosign_reads(found, statement, signer) if by_our_key else found)
    if differ:
        more = f" and {len(differ) - 3} more" if len(differ) > 3 else ""
        named = ", ".join(shown(d, 80) for d in differ[:3]) + more
        return Choice(attachment=mine, replaced=f"its statement is not this run's ({named} differ)")
    if by_our_key:
        return Choice(attachment=_as_cosign_reads(found, statement, signer))
    if signer is None and not run_known and ours.kind == "provenance":
        return Choice(attachment=found)
    return Choice(attachment=mine, replaced=_not_reused(ours.kind, signed=signer is not None))


def _not_reused(kind: str, *, signed: bool) -> str:
    """Why a found statement that differs from this run's in nothing but how it is written, or
    in its build facts, is replaced."""
    if kind != "provenance":
        return "it is not written byte for byte as this run writes it"
    return "no key of ours signed its build facts" if signed else "its build facts are not this run's"
