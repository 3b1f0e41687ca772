"""``withdraw`` and ``reinstate``: a bad release stops being what the floating tags serve, and
comes back.

The state lives at the registries, as notices attached to the image by digest
(``evidence/lifecycle.py``): a withdrawal (the reason, when, who: the CI identity) is in force
until a reinstatement names it. Both commands run in the order publish does, tags last:

1. the notices every endpoint holds are read, and their union is what every endpoint must hold;
   ``withdraw`` adds a withdrawal when none is in force, ``reinstate`` a reinstatement of those
   in force (a rerun finds them and adds nothing: the same bytes everywhere);
2. each endpoint that lacks one of them gets it (an endpoint that does not hold the release is
   said and passed over). If any endpoint fails, no tag moves anywhere; a rerun finishes;
3. the floating tags: at each endpoint, each floating tag of the release is pointed at the
   newest release of the line (the versions whose own floating tags include it) that the
   endpoint serves and that is not withdrawn there. ``withdraw`` moves only a tag that serves
   the withdrawn release (with no other release to serve, it stays, and is said);
   ``reinstate`` moves a tag back only where the reinstated release is that newest one (never
   backwards over a release published since).

The version tag is never touched: a pinned user is not broken, and the image stays pullable by
tag and digest. Nothing is deleted.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from ...errors import ConfigError, NotFoundError, PublishError, ReleaseError
from ...evidence.lifecycle import MAX_REASON, Notice, in_force, make_notice, notices_at, now
from ...evidence.referrers import attach
from ...manifest import ImageSpec, Repo
from ...manifest.types import first_unsafe_char
from ...manifest.versions import version_key
from ...oci.members import spool_dir
from ...oci.registry import Manifest, RegistryClient
from ...progress import Sink
from ..model import record as records
from ..model.plan import Target, make_plan
from ..model.pool import EndpointPool, served_release
from ..model.withdrawn import withdrawals
from ..publishing.tags import point

Action = Literal["withdraw", "reinstate"]
PAST: dict[Action, str] = {"withdraw": "withdrawn", "reinstate": "reinstated"}


def check_reason(reason: str) -> str:
    """A withdrawal's reason: one line of text, said by status and the notes."""
    text = reason.strip()
    bad = first_unsafe_char(text)
    if not text or len(text) > MAX_REASON or bad is not None:
        why = f"contains {bad}" if bad else f"must be 1 to {MAX_REASON} characters"
        msg = f"--reason {why}: say in one line why the release is withdrawn"
        raise ConfigError(msg)
    return text


@dataclass(frozen=True, kw_only=True)
class TagMove:
    """One floating tag at one endpoint: where it was, where it is now."""

    endpoint: str
    ref: str  # host/namespace/image:tag
    was: str | None
    now: str | None
    version: str | None  # the release it serves now (None: none of the line)

    @property
    def moved(self) -> bool:
        return self.was != self.now


@dataclass
class Report:
    ref: str
    digest: str
    action: Action
    made: Notice | None = None  # the notice this run made (None: it found what was needed)
    withdrawn: tuple[Notice, ...] = ()  # in force after the run
    attached: list[str] = field(default_factory=list)  # endpoints that got a notice now
    absent: list[str] = field(default_factory=list)  # endpoints that do not hold the release
    failed: list[tuple[str, str]] = field(default_factory=list)  # endpoint, why
    errors: list[ReleaseError] = field(default_factory=list)  # of the endpoints that failed, as raised
    tags: list[TagMove] = field(default_factory=list)
    record_written: bool = False  # the release record now says what is in force

    @property
    def ok(self) -> bool:
        return not self.failed


class Steering:
    """One withdraw or reinstate of ``pool.spec``'s release, through its endpoint pool."""

    def __init__(self, repo: Repo, pool: EndpointPool, *, by: str, on_line: Sink) -> None:
        self.repo = repo
        self.pool = pool
        self.spec: ImageSpec = pool.spec
        self.by = by
        self.on_line = on_line
        self._line: dict[str, list[tuple[str, Target]]] | None = None
        self._unreadable: list[str] = []  # versions whose manifests cannot be read
        self._served: dict[tuple[str, str], tuple[str | None, bool]] = {}

    def run(self, action: Action, digest: str, reason: str = "") -> Report:
        report = Report(ref=self.spec.ref, digest=digest, action=action)
        targets = self.pool.plan.targets
        with ThreadPoolExecutor(max_workers=min(32, len(targets))) as ex:
            held = list(ex.map(functools.partial(self._held, digest=digest), targets))
        union: dict[str, Notice] = {}
        for t, (found, problem) in zip(targets, held, strict=True):
            if problem == "absent":
                report.absent.append(t.endpoint.name)
            elif isinstance(problem, ReleaseError):
                report.failed.append((t.endpoint.name, problem.message))
                report.errors.append(problem)
            union.update((n.digest, n) for n in found or ())
        if report.failed:
            return report
        if len(report.absent) == len(targets):  # a notice attached nowhere withdraws nothing
            msg = (f"no endpoint holds {self.spec.ref} as {digest} (the image its release record names, else "
                   f"the one its version tag serves): nothing was {PAST[action]} anywhere. "
                   f"`xpu-release status {self.spec.ref}` says what the endpoints serve")  # fmt: skip
            raise NotFoundError(msg)
        notices = tuple(union.values())
        standing = in_force(notices)
        if action == "withdraw" and not standing:
            report.made = self._notice("withdrawal", digest, reason=reason)
        elif action == "reinstate" and standing:
            report.made = self._notice(
                "reinstatement", digest, undoes=tuple(sorted(n.digest for n in standing))
            )
        notices += (report.made,) if report.made is not None else ()
        report.withdrawn = in_force(notices)
        attach_all = functools.partial(self._attach, digest=digest, notices=notices)
        with ThreadPoolExecutor(max_workers=min(32, len(targets))) as ex:
            done = list(ex.map(attach_all, targets, [found for found, _ in held]))
        for t, (got, problem) in zip(targets, done, strict=True):
            if problem:
                report.failed.append((t.endpoint.name, problem.message))
                report.errors.append(problem)
            elif got:
                report.attached.append(t.endpoint.name)
        # A reinstatement with nothing to undo (never withdrawn) moves no tag: it is no way around
        # publish's tags-last rule. After a withdrawal it moves them, also on a rerun.
        never = action == "reinstate" and not any(n.kind == "withdrawal" for n in notices)
        if not report.failed and not never:  # tags last: none moves until every endpoint holds every notice
            self._settle_all(report, action)
        return report

    def _settle_all(self, report: Report, action: Action) -> None:
        for t in self.pool.plan.targets:
            if t.endpoint.name in report.absent:
                continue
            try:
                report.tags += self._settle(t, report.digest, action)
            except ReleaseError as exc:  # the others are settled still; a rerun finishes this one
                report.failed.append((t.endpoint.name, exc.message))
                report.errors.append(exc)

    # --- notices ----------------------------------------------------------------------------

    def _notice(self, kind: Literal["withdrawal", "reinstatement"], digest: str, reason: str = "",
                undoes: tuple[str, ...] = ()) -> Notice:  # fmt: skip
        doing = "withdrawing" if kind == "withdrawal" else "reinstating"
        self.on_line(f"{doing} {self.spec.ref} ({digest[:19]})")
        spec = self.spec
        return make_notice(kind, ref=spec.ref, subject=digest, at=now(), by=self.by,
                           reason=reason, undoes=undoes)  # fmt: skip

    def _held(self, t: Target, *, digest: str) -> tuple[tuple[Notice, ...] | None, str | ReleaseError | None]:
        """The notices one endpoint holds for ``digest``; or "absent" (it does not hold the
        release), or the error it answered."""
        client, repo = self.pool.client(t.endpoint), self.pool.repo(t.endpoint)
        try:
            if client.head_manifest(repo, digest) != digest:
                return None, "absent"
            return notices_at(client, repo, digest), None
        except ReleaseError as exc:
            return None, exc

    def _attach(self, t: Target, held: tuple[Notice, ...] | None, *, digest: str, notices: tuple[Notice, ...]
                ) -> tuple[bool, ReleaseError | None]:  # fmt: skip
        """Every notice of ``notices`` the endpoint lacks, attached (all at once, so the referrers
        tag schema's index keeps each)."""
        if held is None or not notices or {n.digest for n in held} >= {n.digest for n in notices}:
            return False, None
        client, repo = self.pool.client(t.endpoint, fresh=True), self.pool.repo(t.endpoint)
        try:
            subject = client.get_manifest(repo, digest)
            if subject is None:
                return False, PublishError(f"no longer holds {digest}")
            attach(client, repo, subject, [n.attachment for n in notices], created="", spool=spool_dir())
            return True, None
        except ReleaseError as exc:
            return False, exc

    # --- floating tags ----------------------------------------------------------------------

    def _line_of(self) -> dict[str, list[tuple[str, Target]]]:
        """Floating tag → the releases that carry it (version, and its target at each endpoint
        by endpoint name), newest first."""
        if self._line is None:
            line: dict[str, list[tuple[str, Target]]] = {}
            for version in sorted(self.repo.versions(self.spec.image), key=version_key, reverse=True):
                try:
                    spec = self.repo.load(self.spec.image, version)
                except ReleaseError:
                    self._unreadable.append(version)  # no candidate; and it may carry any tag
                    continue
                for target in make_plan(spec, self.pool.registries).targets:
                    for ref in target.floating_refs:
                        line.setdefault(ref, []).append((version, target))
            self._line = line
        return self._line

    def _served_at(self, t: Target, version: str) -> tuple[str | None, bool]:
        """What an endpoint serves at ``version``'s tag, and whether that is withdrawn there."""
        key = (t.endpoint.name, version)
        if key not in self._served:
            client, repo = self.pool.client(t.endpoint), self.pool.repo(t.endpoint)
            served = client.head_manifest(repo, version)
            withdrawn = bool(served and withdrawals(client, repo, served))
            self._served[key] = (served, withdrawn)
        return self._served[key]

    def _settle(self, t: Target, digest: str, action: Action) -> list[TagMove]:
        client, repo = self.pool.client(t.endpoint), self.pool.repo(t.endpoint)
        moves = []
        for ref in t.floating_refs:
            tag = ref.rpartition(":")[2]
            was = client.head_manifest(repo, tag)
            if action == "withdraw" and was != digest:
                continue  # it serves another release: not this command's to move
            newest = self._newest(t, ref, action)
            if action == "reinstate" and (newest is None or newest[1] != digest or was == digest):
                continue  # another release is the newest of the line (or it serves this one already)
            if action == "reinstate" and (unread := self._newer_unreadable()):
                self.on_line(f"{ref} stays: the manifest of {', '.join(unread)} (newer) cannot be read")
                continue
            version, now_digest = newest if newest is not None else (None, was)
            if now_digest is not None and now_digest != was:
                _point(client, repo, tag, now_digest, ref)
            moves.append(TagMove(endpoint=t.endpoint.name, ref=ref, was=was, now=now_digest, version=version))
            self.on_line(f"{ref} → {version or 'stays: no other release of the line is served here'}")
        return moves

    def _newer_unreadable(self) -> list[str]:
        """The versions newer than this release whose manifests cannot be read: what they carry
        is unknown, so a reinstatement moves no tag back over them (as ``past_withdrawn``)."""
        mine = version_key(self.spec.version)
        return [v for v in self._unreadable if version_key(v) > mine]

    def _newest(self, t: Target, ref: str, action: Action) -> tuple[str, str] | None:
        """The newest release of the line that carries ``ref`` which ``t`` serves and has not
        withdrawn: (version, digest). For ``withdraw``, older than the withdrawn one: a tag moves
        back, never forward onto a release whose own publish never gave it the tag."""
        mine = version_key(self.spec.version)
        for version, target in self._line_of().get(ref, []):
            if target.endpoint.name != t.endpoint.name:
                continue
            if action == "withdraw" and version_key(version) >= mine:
                continue
            served, withdrawn = self._served_at(t, version)
            if served is not None and not withdrawn:
                return version, served
        return None


def _point(client: RegistryClient, repo: str, tag: str, digest: str, ref: str) -> None:
    manifest: Manifest | None = client.get_manifest(repo, digest)
    if manifest is None:
        msg = f"{ref}: {digest} is no longer served; nothing was moved there"
        raise PublishError(msg)
    point(client, repo, tag, manifest, ref)


def steer(
    repo: Repo, pool: EndpointPool, action: Action, record_path: Path, *, by: str,
    reason: str = "", on_line: Sink = lambda _: None,
) -> Report:  # fmt: skip
    """Withdraw or reinstate ``pool.spec``'s release at every endpoint of the pool: the image its
    record at ``record_path`` names, else the one its endpoints serve (``served_release``). The
    record, checked writable before any endpoint changes, then says what is in force."""
    spec = pool.spec
    record = records.writable(record_path, spec.ref, repo.root)  # before any endpoint is changed
    recorded = record.digest if record is not None and record.ref == spec.ref else None
    nothing = f"no endpoint serves {spec.ref} and there is no release record: nothing to {action}"
    digest = served_release(pool, recorded, nothing=nothing).digest
    with pool.metering():
        report = Steering(repo, pool, by=by, on_line=on_line).run(action, digest, reason)
    if report.ok and record is not None and record.digest == digest:
        standing = report.withdrawn[-1].to_json() if report.withdrawn else None
        if record.withdrawn != standing:
            records.write(replace(record, withdrawn=standing), record_path, repo.root)
            report.record_written = True
    return report
