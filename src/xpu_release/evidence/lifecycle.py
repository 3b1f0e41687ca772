"""What a release's life says about it, attached by digest like its SBOM (``referrers.py``):

- the **lifecycle document**: its end-of-life date, the way .NET's images carry one (an OCI 1.1
  referrer of artifact type ``application/vnd.microsoft.artifact.lifecycle`` whose manifest
  annotation ``vnd.microsoft.artifact.lifecycle.end-of-life.date`` names the date, so that a
  tool can tell without a website). Its layer is an in-toto statement about the image (signed
  like the provenance when there is a key); made from the manifest's ``support:``, so the same
  date gives the same bytes and a rerun attaches nothing new.
- **notices**: that a release was withdrawn (the reason, when, and who: the CI identity, as the
  provenance names its builder), or reinstated. The registry holds the state: a withdrawal is
  in force until a reinstatement names it (``undoes``, by the digest of its bytes). Notices are
  never removed (nothing is deleted, and a registry with the referrers API lists every
  referrer anyway), so the order of events never depends on a clock: withdraw, reinstate and
  withdraw again leaves two withdrawals, one undone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Literal, cast

from ..errors import PublishError, RegistryAuthError, ReleaseError
from ..guard.shown import shown
from ..oci.registry import RegistryClient
from ..oci.store import canonical_json
from .attachment import NOTICE_KINDS, Attachment, statement
from .referrers import Referrers, fetch_attachment, list_referrers

IN_TOTO_STATEMENT = "https://in-toto.io/Statement/v1"
# Ours, assumed: no public URI is registered for these predicates.
LIFECYCLE_PREDICATE = "https://xpu-release.invalid/lifecycle/v1"
NOTICE_PREDICATES = {
    "withdrawal": "https://xpu-release.invalid/withdrawal/v1",
    "reinstatement": "https://xpu-release.invalid/reinstatement/v1",
}
MAX_REASON = 500  # characters: a sentence or two, shown on one line by status and the notes
MAX_SAID = 120  # characters of a notice's other words (who, when, which release) as read back

NoticeKind = Literal["withdrawal", "reinstatement"]


def _statement(image: str, subject: str, predicate_type: str, predicate: dict[str, Any]) -> bytes:
    return canonical_json({
        "_type": IN_TOTO_STATEMENT,
        "subject": [{"name": image, "digest": {"sha256": subject.removeprefix("sha256:")}}],
        "predicateType": predicate_type,
        "predicate": predicate,
    })  # fmt: skip


def rfc3339(day: date) -> str:
    """A day as the lifecycle annotation writes it: midnight UTC."""
    return f"{day.isoformat()}T00:00:00Z"


def lifecycle_statement(image: str, ref: str, end: date, subject: str) -> bytes:
    """The lifecycle document of ``ref``'s image manifest ``subject``: its end-of-life date."""
    return _statement(image, subject, LIFECYCLE_PREDICATE, {"release": ref, "endOfLife": rfc3339(end)})


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, kw_only=True)
class Notice:
    """A withdrawal or a reinstatement of one release, and its exact bytes."""

    kind: NoticeKind
    release: str
    at: str  # when (RFC 3339, UTC)
    by: str  # who: the CI identity
    reason: str = ""
    undoes: tuple[str, ...] = ()  # a reinstatement: the digests of the withdrawals it lifts
    payload: bytes

    @property
    def digest(self) -> str:
        return self.attachment.digest

    @property
    def attachment(self) -> Attachment:
        """As attached: dated with its own time, so every endpoint holds the same manifest."""
        return Attachment(kind=self.kind, payload=self.payload, created=self.at)

    def words(self) -> str:
        """One line: "withdrawn 2026-12-05T10:00:00Z by ci:42: the reason"."""
        done = "withdrawn" if self.kind == "withdrawal" else "reinstated"
        return f"{done} {self.at} by {self.by}" + (f": {self.reason}" if self.reason else "")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "at": self.at, "by": self.by, "reason": self.reason,
                "undoes": list(self.undoes), "notice": self.digest}  # fmt: skip


def make_notice(kind: NoticeKind, *, ref: str, subject: str, at: str, by: str, reason: str = "",
                undoes: tuple[str, ...] = ()) -> Notice:  # fmt: skip
    """The notice of ``kind`` about the release ``ref`` (NAME:VERSION), whose image is ``subject``."""
    image = ref.rpartition(":")[0]
    predicate: dict[str, Any] = {"release": ref, "at": at, "by": by}
    if kind == "withdrawal":
        predicate["reason"] = reason
    else:
        predicate["undoes"] = list(undoes)
    payload = _statement(image, subject, NOTICE_PREDICATES[kind], predicate)
    return Notice(kind=kind, release=ref, at=at, by=by, reason=reason, undoes=undoes, payload=payload)


def read_notice(att: Attachment) -> Notice | None:
    """The notice an attachment of a notice kind holds (None: not one of ours, or damaged). Its
    words are outside text: each is ``shown`` (one clean, bounded line); its bytes are kept."""
    doc = statement(att.payload)
    if doc is None or att.kind not in NOTICE_KINDS or doc.get("predicateType") != NOTICE_PREDICATES[att.kind]:
        return None
    p = doc.get("predicate")
    if not isinstance(p, dict) or not all(isinstance(p.get(k), str) for k in ("release", "at", "by")):
        return None
    undoes = p.get("undoes") or []
    if not isinstance(undoes, list) or not all(isinstance(d, str) for d in undoes):
        return None
    return Notice(kind=cast(NoticeKind, att.kind), release=shown(p["release"], MAX_SAID),
                  at=shown(p["at"], MAX_SAID), by=shown(p["by"], MAX_SAID),
                  reason=shown(str(p.get("reason") or ""), MAX_REASON), undoes=tuple(undoes),
                  payload=att.payload)  # fmt: skip


def in_force(notices: tuple[Notice, ...]) -> tuple[Notice, ...]:
    """The withdrawals no reinstatement among ``notices`` lifts: the release is withdrawn while
    there is one."""
    lifted = {d for n in notices if n.kind == "reinstatement" for d in n.undoes}
    return tuple(n for n in notices if n.kind == "withdrawal" and n.digest not in lifted)


def notices_at(client: RegistryClient, repo: str, subject: str) -> tuple[Notice, ...]:
    """The notices the referrers of ``subject`` list at one endpoint."""
    return notices_in(client, repo, list_referrers(client, repo, subject))


def notices_in(client: RegistryClient, repo: str, found: Referrers) -> tuple[Notice, ...]:
    """The notices among referrers ``found`` at one endpoint. One that is listed but cannot be
    read (not served, an error after the retries, damaged) fails closed: whether the release is
    withdrawn cannot be told, and the error says so. One that is served but is not a notice of
    ours (another predicate, a statement we cannot parse) is passed over: it withdraws nothing."""
    out: dict[str, Notice] = {}
    for kind in NOTICE_KINDS:
        for desc in found.ours(kind):
            try:
                attachment = fetch_attachment(client, repo, desc, kind)
            except RegistryAuthError:
                raise
            except ReleaseError as exc:
                msg = (f"{client.endpoint.name}: the {kind} notice {desc.digest} is listed but cannot be "
                       f"read ({exc.message}): whether the release is withdrawn cannot be told")  # fmt: skip
                raise PublishError(msg) from exc
            notice = read_notice(attachment)
            if notice is not None:
                out.setdefault(notice.digest, notice)
    return tuple(sorted(out.values(), key=lambda n: (n.at, n.digest)))
