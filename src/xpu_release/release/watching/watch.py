"""``watch``: is every published release still safe, without rebuilding it or having it in the
engine? For each release the repository's manifests name, the public endpoint is asked what its
version tag serves; a release not served is *not published* (reported, not an error). A release
past its support date (the manifest's ``support:``, ``manifest/support.py``) is *end of life*:
said, and not asked about at all (no registry, no scan, no patch; nothing is deleted). Then:

- **superseded**: a later release of its line (a patch) is published; it is left to that one;
- its SBOM **as published** (read from the registry by digest) is scanned against today's
  advisories and the image's current reviewed VEX (``evidence/scan.py``, the gate's rules);
- each open finding (no valid exception) gets its fix within reach (``evidence/remedy.py``) and
  its SLA clock (``sla.py``); the first time a scan saw it comes from the re-scan history, else
  the local release record, else today;
- the base (``basewatch.py``): its tag moved, a patch of our base release is published, or our
  base release needs a patch itself (then this one needs one *through* it).

The answer per release: *needs a patch* (every reason: a fixable finding whose severity has an
SLA or that the gate stops on, a base that moved), else *out of SLA* (an open finding past its
due day that no version fixes yet), else *up to date*. A release that cannot be checked (its
endpoint down, its SBOM missing or damaged, its base tag gone) says why, on its own; the others
are still checked. Each answer is added to the release's re-scan history (``history.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any

from ...errors import ManifestError, OutputError, ReleaseError, VerifyFailed
from ...evidence.osv import Advisories
from ...evidence.remedy import published, records_for, smallest_fix
from ...evidence.scan import Finding, ScanResult, scan_packages
from ...evidence.vex import Statement, published_at, read_vex, vex_path
from ...manifest import ImageSpec, Repo
from ...manifest.lines import later_patch_tags, line_of, newer_in_line
from ...manifest.support import state as support_state
from ...manifest.versions import version_key
from ..model import history
from ..model.history import Seen, State
from ..model.record import default_path, read_optional
from .basewatch import BaseUnchecked, Reason, Unchecked, base_reasons, unchecked
from .published import Reader, read_sboms
from .readahead import ReadAhead
from .sla import clock, overall
from .watched import Open, Watched


class Watcher:
    """One run of ``watch``: every release asked at most once (a child asks its base first)."""

    def __init__(self, repo: Repo, reader: Reader, advisories: Advisories, *, today: date, now: datetime,
                 keep_history: bool = True, read_ahead: int | None = None) -> None:  # fmt: skip
        self.repo = repo
        self.reader = reader
        self.advisories = advisories
        self.today = today
        self.now = now
        self.keep_history = keep_history
        self._done: dict[str, Watched] = {}
        self._asking: set[str] = set()
        self._vex: dict[str, tuple[tuple[Statement, ...], Unchecked | None]] = {}
        self._remedies: dict[
            tuple[str, str, str, tuple[str, ...], tuple[str, ...]], tuple[str | None, date | None]
        ] = {}
        self.ahead: ReadAhead | None = None
        self.read_ahead_workers = read_ahead  # None: readahead.WORKERS; 0: none

    @property
    def stamp(self) -> str:
        return self.now.strftime("%Y-%m-%dT%H:%M:%SZ")

    def forget_all(self) -> None:
        """Ask every release again (``watch --release``: after a release of a patch)."""
        self._done.clear()
        self.reader.forget()
        self.stop_reading_ahead()

    def read_ahead(self, refs: list[str]) -> None:
        """Read the SBOMs of ``refs`` ahead, in this order (``readahead.py``)."""
        self.stop_reading_ahead()
        wanted = []
        for ref in refs:
            try:
                spec = self.repo.load_ref(ref)
                ep = self.reader.public()
            except ReleaseError:  # said when it is asked about
                continue
            if not support_state(spec, self.today).end_of_life:  # never asked about: not read either
                wanted.append((ref, spec.image, spec.version, spec.platforms))
        if wanted and self.read_ahead_workers != 0:
            reader = self.reader
            self.ahead = ReadAhead(lambda: Reader(reader.registries, reader.credentials, reader.retry), ep,
                                   wanted, workers=self.read_ahead_workers)  # fmt: skip

    def stop_reading_ahead(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
            self.ahead = None

    def watch(self, ref: str) -> Watched:
        if self.ahead is not None:
            self.ahead.reached(ref)
        if ref not in self._done:
            self._asking.add(ref)
            try:
                self._done[ref] = self._watch(ref)
            finally:
                self._asking.discard(ref)
        return self._done[ref]

    def base_needs_patch(self, ref: str) -> bool:
        """Whether our base release ``ref`` needs a patch (a chain that loops says no); a base
        that could not be checked raises ``BaseUnchecked``: its child's answer is incomplete."""
        if ref in self._asking:
            return False
        answer = self.watch(ref)
        if answer.state == "could not check" and answer.unchecked:
            raise BaseUnchecked(ref, answer.unchecked[0])
        return answer.state == "needs a patch"

    def _watch(self, ref: str) -> Watched:
        try:
            spec = self.repo.load_ref(ref)
        except ReleaseError as exc:
            return Watched(ref=ref, state="could not check", checked_at=self.stamp,
                           unchecked=(unchecked("manifest", exc),))  # fmt: skip
        standing = support_state(spec, self.today)
        if standing.end_of_life:  # skipped: a release past its support date gets no patch
            return Watched(ref=ref, state="end of life", checked_at=self.stamp, line=line_of(spec),
                           end_of_life=str(standing.end))  # fmt: skip
        ep = self.reader.public()
        head = Watched(ref=ref, state="not published", checked_at=self.stamp, line=line_of(spec),
                       endpoint=ep.name)  # fmt: skip
        try:
            digest = self.reader.served(ep, spec.image, spec.version)
            if digest is None:
                return head
            head = _with(head, digest=digest)
            local = newer_in_line(self.repo, spec)
            # and the patches a scheduled job published whose files are not committed here yet
            committed = self.repo.versions(spec.image)  # a version with a manifest: known, patch or not
            tagged = later_patch_tags(self.reader.tags(ep, spec.image), spec)
            elsewhere = [v for v in tagged if v not in committed]
            newest_first = sorted([*local, *elsewhere], key=version_key, reverse=True)
            later = [(v, self.reader.served(ep, spec.image, v)) for v in newest_first]
            # a withdrawn release supersedes nothing: the release it would replace is served again
            published_later = [
                v for v, d in later if d is not None and not self.reader.withdrawn(ep, spec.image, d)
            ]
        except ReleaseError as exc:
            return _with(head, state="could not check", unchecked=(unchecked("registry", exc),))
        pending = next((v for v, d in later if d is None and v in local), None)
        if published_later:
            newest = published_later[0]
            seen = first_seen_of(self.repo.root, spec, self.today)
            done = _with(head, state="superseded", superseded_by=f"{spec.image}:{newest}",
                         uncommitted=newest in elsewhere, seen=tuple(sorted(seen.items())))  # fmt: skip
            return self._keep(spec, done)
        head = _with(head, pending=f"{spec.image}:{pending}" if pending else None)
        return self._keep(spec, self._check(spec, head, digest))

    def _check(self, spec: ImageSpec, head: Watched, digest: str) -> Watched:
        problems: list[Unchecked] = []
        opened: list[Open] = []
        excepted = 0
        seen = first_seen_of(self.repo.root, spec, self.today)
        ep = self.reader.public()
        statements, problem = self._statements(spec)
        sboms = 0
        try:
            served = self.ahead.sboms(spec.ref, digest) if self.ahead is not None else None
            if served is None:  # not read ahead: read now (of an index, each platform's image's)
                served = self.reader.release_sboms(ep, spec.image, digest, spec.platforms)
            images, payloads = served.images, served.payloads
            packages = read_sboms(payloads, f"{ep.name}: {spec.ref}")
            sboms = len(payloads)
        except ReleaseError as exc:
            problems.append(unchecked("sbom", exc))
        else:
            problems += [problem] if problem is not None else []
            where = published_at(spec.image, self.reader.registries.publish_endpoints())
            result = scan_packages(spec, packages, self.advisories, statements, today=self.today,
                                   digests=frozenset({digest, *images}), repositories=where)  # fmt: skip
            problems += _unread(spec, self.advisories, result)
            excepted = sum(1 for f in result.findings if f.exception is not None)
            for f in result.findings:  # excepted ones too: an exception that expires keeps the day
                seen[(f.ids[0], f.package.name)] = self._first_day(f, seen)
            opened = [self._open(spec, f, seen) for f in result.findings if f.exception is None]
        reasons = [
            _advisory_reason(o) for o in opened if o.fix and (o.clock.days is not None or o.finding.blocking)
        ]
        found, trouble = base_reasons(self.repo, spec, self.reader, self.base_needs_patch)
        reasons += found
        problems += trouble
        state: State = "up to date"
        if problems:
            state = "could not check"
        elif reasons:
            state = "needs a patch"
        elif overall([o.clock for o in opened]) == "out":
            state = "out of SLA"
        scanned = not any(u.what == "sbom" for u in problems)
        return _with(head, state=state, reasons=tuple(reasons), open=tuple(opened), excepted=excepted,
                     unchecked=tuple(problems), scanned=scanned, sboms=sboms,
                     seen=tuple(sorted(seen.items())))  # fmt: skip

    def _first_day(self, f: Finding, seen: Seen) -> date:
        """The first day a scan saw ``f`` (by any of its ids): never later than this run's day
        (a what-if run in the past sees it on its day)."""
        return min([d for i in f.ids if (d := seen.get((i, f.package.name))) is not None] + [self.today])

    def _open(self, spec: ImageSpec, f: Finding, seen: Seen) -> Open:
        key = (f.package.ecosystem, f.package.name, f.package.version, f.ids, f.fixed)
        if key not in self._remedies:  # judged once a run: the releases share most findings
            records = records_for(self.advisories, f)
            self._remedies[key] = (smallest_fix(f.package, f.fixed, records), published(records))
        smallest, day = self._remedies[key]
        first = self._first_day(f, seen)
        when = clock(spec, f.level, published=day, first_seen=first, today=self.today)
        return Open(finding=f, fix=smallest, first_seen=first, clock=when)

    def _statements(self, spec: ImageSpec) -> tuple[tuple[Statement, ...], Unchecked | None]:
        """The image's reviewed VEX, read once per image; a mistake in it is named (exit 2)."""
        if spec.image not in self._vex:
            path = vex_path(self.repo.root, spec.image)
            if not path.exists():
                self._vex[spec.image] = ((), None)
            else:
                found, problems = read_vex(path, self.repo.rel(path), today=self.today,
                                           horizon_days=spec.review_horizon_days)  # fmt: skip
                why = unchecked("vex", ManifestError(problems)) if problems else None
                self._vex[spec.image] = (found, why)
        return self._vex[spec.image]

    def _keep(self, spec: ImageSpec, done: Watched) -> Watched:
        """Add a release's answer to its history (when it has one: scanned, or superseded),
        with every finding seen and how many advisories were read. A history that cannot be
        written leaves the answer as it is, with why (the run ends in 13: ``exit_code``)."""
        if not self.keep_history or not (done.scanned or done.state == "superseded"):
            return done
        entry = {**done.to_json(), "seen": history.seen_json(dict(done.seen)),
                 "advisories": self.advisories.counts.records}  # fmt: skip
        try:
            path = history.append(self.repo.root, spec.image, spec.version, entry, self.now)
        except OutputError as exc:
            return _with(done, history_error=exc.message)
        return _with(done, history=self.repo.rel(path))


def first_seen_of(root: Path, spec: ImageSpec, today: date) -> Seen:
    """When a scan first saw each finding of ``spec``: the latest history entry carries every one
    forward (the earliest over the whole history); the release record's scan saw its findings on
    the day it was published."""
    seen: Seen = {}
    try:
        record = read_optional(default_path(root, spec.image, spec.version))
    except ReleaseError:  # a record that is not one says nothing (status names it)
        record = None
    gate = record.gate() if record is not None else None
    if record is not None and gate is not None and gate.status != "skipped":
        try:
            day = min(date.fromisoformat(record.published_at[:10]), today)
        except ValueError:
            day = today
        seen.update(((f.id, f.package), day) for f in gate.findings)
    for key, day in history.latest_seen(root, spec.image, spec.version).items():
        seen[key] = min(day, seen.get(key, day))
    return seen


def _with(w: Watched, **changes: Any) -> Watched:
    from dataclasses import replace

    return replace(w, **changes)


def _unread(spec: ImageSpec, advisories: Advisories, result: ScanResult) -> list[Unchecked]:
    """What of the answer rests on what could not be read (exit 7): the advisories (a record
    unreadable, which packages it is about unknown), or a record about one of the release's
    packages that cannot be judged for it. Never "up to date" then."""
    why = advisories.unread
    if why is None and result.unjudged:
        why = f"{len(result.unjudged)} advisory record(s) cannot be judged: {'; '.join(result.unjudged[:3])}"
    return [unchecked("advisories", VerifyFailed(f"{spec.ref}: {why}"))] if why is not None else []


def _advisory_reason(o: Open) -> Reason:
    f = o.finding
    said = f"{f.ids[0]} ({f.level}) in {f.package.name} {f.package.version}: fixed in {o.fix}"
    return Reason(kind="advisory", id=f.ids[0], package=f.package.name, installed=f.package.version,
                  fix=o.fix, severity=f.level, text=said)  # fmt: skip


def watch_all(
    watcher: Watcher, refs: list[str], order: Callable[[list[str]], list[list[str]]]
) -> list[Watched]:
    """Every ref, parents first (a child's answer may go *through* its base's); then, for each
    one superseded, the release that superseded it (the newest published of its line: what
    the line's users pull), which is checked instead, when its manifest is in this checkout (a
    scheduled run's patch is published before its files are committed: the answer says so)."""
    ranked = {r: i for i, r in enumerate(r for wave in order(refs) for r in wave)}
    ordered = sorted(refs, key=lambda r: ranked.get(r, len(ranked)))
    watcher.read_ahead(ordered)
    try:
        for ref in ordered:
            watcher.watch(ref)
    finally:
        watcher.stop_reading_ahead()
    asked = list(dict.fromkeys(refs))
    for ref in asked:  # grows as it goes: a superseding release is asked in turn
        done = watcher.watch(ref)
        later = None if done.uncommitted else done.superseded_by  # no manifest here: said, not asked
        if later is not None and later not in asked:
            asked.append(later)
    return [watcher.watch(r) for r in asked]
