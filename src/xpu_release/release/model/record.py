"""The release record: what was published where, with which digest, verified when.

Written by every publish (also a failed one: it says which endpoints are done), read by
``status`` and by the release notes, archived by CI. Read through the guarded layer (bounded
in size and nesting, a FIFO refused unopened), checked against its schema (``recordschema.py``: every
field this tool reads has its type there), and the gate's part read into typed values (``RecordedScan``).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ...errors import ConfigError, DamagedFileError, NotFoundError, OutputError
from ...files import describe
from ...guard.generated import open_repository_folder, write_generated
from ...guard.limits import MAX_RECORD_BYTES
from ...guard.reading import Refused, parse_json, read_file
from ...guard.shown import shown
from ...jsontext import readable
from .recordschema import shape_problem

# staged: the endpoint holds the release by digest, but its version tag is not written yet
# (another endpoint failed, so no tag was written anywhere).
Status = Literal["verified", "unchanged", "staged", "failed", "planned"]


@dataclass(frozen=True, kw_only=True)
class EndpointRecord:
    endpoint: str
    host: str
    version_ref: str
    floating_refs: tuple[str, ...]
    status: Status
    digest: str | None
    error: str | None = None
    seconds: float = 0.0
    uploaded_bytes: int = 0
    mounted_blobs: int = 0
    skipped_blobs: int = 0
    retries: int = 0
    verified_at: str | None = None


@dataclass(frozen=True, kw_only=True)
class PlatformRecord:
    """One platform's image of a platformed release (``platforms:``), as its index names it."""

    platform: str  # linux/arm64
    digest: str | None  # its image manifest's (None: its first push failed)
    tested_image_id: str  # the config digest its smoke tests ran against
    inputs_sha256: str
    size: int = 0  # bytes a pull of it fetches: its config and layers, as published
    attachments: dict[str, str] = field(default_factory=dict)  # its own SBOM, provenance, VEX…


@dataclass(frozen=True, kw_only=True)
class Promotion:
    """One set of endpoints that got the release by ``promote``: from which channel (a
    registries file), to which, and when."""

    source: str  # the registries file it was promoted from
    channel: str  # the registries file of the endpoints it was promoted to
    endpoints: tuple[str, ...]
    at: str


@dataclass(frozen=True, kw_only=True)
class ReleaseRecord:
    ref: str
    manifest: str
    manifest_sha256: str
    inputs_sha256: str
    tested_image_id: str  # the config digest tested (a platformed release: its first platform's)
    digest: str | None  # the manifest digest every endpoint serves (a platformed release: its index's)
    published_at: str
    complete: bool  # every endpoint verified
    floating_moved: tuple[str, ...]
    endpoints: tuple[EndpointRecord, ...] = field(default_factory=tuple)
    # Documents attached to the image by digest at every endpoint (attest.py, referrers.py):
    # kind ("sbom", "provenance", and "vex" when the gate ran) → the digest of the artifact
    # manifest that carries it.
    attachments: dict[str, str] = field(default_factory=dict)
    # The vulnerability gate (evidence/scan.py): passed with its findings, or skipped and why;
    # None when no release ran it (a bare `publish`).
    scan: dict[str, Any] | None = None
    # ``withdraw``: the withdrawal in force (its notice's fields; None: not withdrawn). The
    # registries hold the state (evidence/lifecycle.py); this says what the last command found.
    withdrawn: dict[str, Any] | None = None
    # Each set of endpoints the release reached after its publish (``promote``), and when.
    promotions: tuple[Promotion, ...] = ()
    # The performance evaluation (image/evaluation.py ``entry``): every round's figures of every
    # arm, the comparisons and what they concluded, or skipped and why; None when none ran.
    evaluation: dict[str, Any] | None = None
    # A platformed release: each platform's image the index names, in the manifest's order
    # (none for a release of linux/amd64 alone, whose record has no such key).
    platforms: tuple[PlatformRecord, ...] = ()

    def to_json(self) -> dict[str, Any]:  # a release of one platform has no "platforms" key
        return {k: v for k, v in asdict(self).items() if k != "platforms" or self.platforms}

    def gate(self) -> RecordedScan | None:
        """The gate's result as typed values (None: no release ran it). The record was checked
        against its schema (``recordschema``) when it was read, so every field has its type."""
        if self.scan is None:
            return None
        findings = tuple(map(RecordedFinding.from_json, self.scan["findings"]))
        return RecordedScan(status=self.scan["status"], reason=self.scan["reason"], findings=findings)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReleaseRecord:
        eps = tuple(
            EndpointRecord(**{**e, "floating_refs": tuple(e["floating_refs"])}) for e in data["endpoints"]
        )
        promotions = tuple(
            Promotion(**{**p, "endpoints": tuple(p["endpoints"])}) for p in data.get("promotions") or ()
        )
        platforms = tuple(PlatformRecord(**{**p, "attachments": dict(p.get("attachments") or {})})
                          for p in data.get("platforms") or ())  # fmt: skip
        return cls(**{**data, "endpoints": eps, "floating_moved": tuple(data["floating_moved"]),
                      "attachments": dict(data.get("attachments") or {}),
                      "promotions": promotions, "platforms": platforms})  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class RecordedFinding:
    """One finding as the record keeps it (``scan.record_entry`` writes it), read back from a
    file anyone may have written (a record, a re-scan history): every text in it is made safe to
    show as it is made (``guard.shown``: a newline or an escape sequence in an id, a package or a
    justification is written as a visible escape), so ``notes`` and ``diff`` cannot print a
    forged line. A justification is escaped whole, never cut."""

    id: str
    package: str
    installed: str
    severity: str
    aliases: tuple[str, ...] = ()
    purls: tuple[str, ...] = ()
    fixed: tuple[str, ...] = ()
    vex: str | None = None  # the status of the exception that covers it
    justification: str = ""

    def __post_init__(self) -> None:
        for name in ("id", "package", "installed", "severity"):
            object.__setattr__(self, name, shown(getattr(self, name)))
        for name in ("aliases", "purls", "fixed"):
            object.__setattr__(self, name, tuple(shown(x) for x in getattr(self, name)))
        if self.vex is not None:
            object.__setattr__(self, "vex", shown(self.vex))
        object.__setattr__(self, "justification", shown(self.justification, len(self.justification)))

    @classmethod
    def from_json(cls, f: dict[str, Any]) -> RecordedFinding:
        return cls(id=f["id"], package=f["package"], installed=f["installed"], severity=f["severity"],
                   aliases=tuple(f.get("aliases") or ()), purls=tuple(f.get("purls") or ()),
                   fixed=tuple(f.get("fixed") or ()), vex=f.get("vex"),
                   justification=f.get("justification") or "")  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class RecordedScan:
    status: Literal["passed", "failed", "skipped"]
    reason: str
    findings: tuple[RecordedFinding, ...]


def endpoint_record(
    target: Any, status: Status, digest: str | None, error: str | None, started: float, stats: dict[str, int]
) -> EndpointRecord:
    """What one endpoint's stage or tag ended in, with its client's counters and the time since
    ``started`` (monotonic); ``target`` is the plan's ``Target`` of the endpoint."""
    import time
    from datetime import UTC, datetime

    verified = status in ("verified", "unchanged")
    return EndpointRecord(
        endpoint=target.endpoint.name,
        host=target.endpoint.host,
        version_ref=target.version_ref,
        floating_refs=target.floating_refs,
        status=status,
        digest=digest,
        error=error,
        seconds=round(time.monotonic() - started, 3),
        uploaded_bytes=stats["uploaded_bytes"],
        mounted_blobs=stats["mounted"],
        skipped_blobs=stats["skipped_blobs"],
        retries=stats["retries"],
        verified_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") if verified else None,
    )


def default_path(root: Path, image: str, version: str) -> Path:
    return root / "out" / "releases" / image / f"{version}.json"


def attempt_path(path: Path) -> Path:
    """Where a run that did less than the record it found writes what it did, beside it."""
    return path.with_name(path.stem + ".attempt.json")


def completeness(record: ReleaseRecord) -> tuple[int, int, int, int]:
    """How much of the release a record says is done, comparable: complete first, then
    endpoints serving it, then endpoints holding it by digest, then a digest at all."""
    serving = sum(e.status in ("verified", "unchanged") for e in record.endpoints)
    staged = sum(e.status == "staged" for e in record.endpoints)
    return (int(record.complete), serving, staged, int(record.digest is not None))


def write(record: ReleaseRecord, path: Path, root: Path | None = None) -> None:
    """``record`` at ``path``, whole or not at all, through the guarded way out: a temporary file
    of this run's own renamed over it, so that two runs writing at once never share (or lose)
    one; a link at ``path`` is replaced by the record, never followed; inside the repository
    ``root`` (when given), no folder on the way is followed (``generated.within_repository``)."""
    data = (readable(record.to_json(), ensure_ascii=True) + "\n").encode()
    write_generated(path, data, root=root, what="release record")


def writable(path: Path, ref: str, root: Path) -> ReleaseRecord | None:
    """The record at ``path`` (None: none yet), checked before a command changes a registry:
    its folder can be made and entered as the write will (inside the repository ``root``, no
    link below it followed: ``generated.within_repository``), and a record there is ``ref``'s.
    A refusal here changes nothing anywhere; after the registries changed, it would leave them
    changed with no record (exit 13 for a folder that cannot be, 3 for another release's)."""
    try:
        os.close(open_repository_folder(root, path.parent))
    except OSError as exc:
        msg = f"the release record cannot be written at {path}: {describe(exc)}; nothing was changed"
        raise OutputError(msg) from None
    if path.is_dir() and not path.is_symlink():  # a write replaces a file or a link, never a folder
        msg = f"the release record cannot be written at {path}: it is a folder; nothing was changed"
        raise OutputError(msg)
    try:
        current = read_optional(path)
    except DamagedFileError:
        return None  # a damaged record says nothing: this run's replaces it (keep)
    return _of(current, path, ref)


def of_release(path: Path, ref: str) -> ReleaseRecord | None:
    """The record at ``path`` (None: none there), which must be ``ref``'s: another release's
    record is refused (exit 3), never held against this release's endpoints."""
    return _of(read_optional(path), path, ref)


def _of(current: ReleaseRecord | None, path: Path, ref: str) -> ReleaseRecord | None:
    if current is not None and current.ref != ref:
        msg = (f"{path} is the record of {shown(current.ref, 80)}, not of {ref}: nothing was changed; "
               f"pass --record naming {ref}'s record (or a new file)")  # fmt: skip
        raise ConfigError(msg)
    return current


def keep(record: ReleaseRecord, path: Path, root: Path | None = None) -> Path:
    """Write ``record`` at ``path`` unless the record there says more is done (a complete
    release, more endpoints serving it): then it goes beside it (``attempt_path``) and the
    better record stays as it was. Returns where it was written."""
    try:
        current = read_optional(path)
    except DamagedFileError:
        current = None  # a damaged record says nothing: this run's replaces it
    if current is not None and current.ref == record.ref and current.digest == record.digest:
        record = replace(record, promotions=current.promotions)  # a publish does not know them
    if current is not None and current.ref == record.ref and completeness(record) < completeness(current):
        write(record, attempt_path(path), root)
        return attempt_path(path)
    write(record, path, root)
    attempt_path(path).unlink(missing_ok=True)  # superseded by a record at least as complete
    return path


def read_optional(path: Path) -> ReleaseRecord | None:
    """The record at ``path``; None only when nothing at all is there. Anything else that is
    not a record (a directory, a FIFO, a dangling link, damaged text) is exit 12."""
    if not path.exists() and not path.is_symlink():
        return None
    return read(path)


def read(path: Path) -> ReleaseRecord:
    def missing(_: str) -> Exception:
        return NotFoundError(f"no release record at {path}; publish first or pass --record")

    what = "the release record"
    try:
        raw = read_file(path, what=what, limit=MAX_RECORD_BYTES, error=Refused, missing=missing)
        data = parse_json(raw, what=what, error=Refused)
        problem = shape_problem(data)
        if problem is None:
            return ReleaseRecord.from_json(data)
        said = problem if problem.startswith("has no") else f"is not a release record ({problem})"
        why = f"{what} {said}"
    except Refused as exc:
        why = str(exc)
    msg = f"{path}: {why}; publish again to rewrite it, or pass --record with an intact copy"
    raise DamagedFileError(msg)
