"""``patch``: prepare the next patch release of a published release from what ``watch`` found:
a manifest that extends it (``manifest/bump.py``), its lock and its Dockerfile.

- each package with open findings is bumped to the smallest version that fixes them all, that
  no advisory of the package affects, and that the package index offers (``image/index.py``):
  one the advisories name, else (the index has none of those) the smallest later version it
  has; a manifest component by its pin; a dependency no component pins by a floor in
  ``pip.constraints``, which ``lock`` holds to;
- a base tag that moved is re-pinned by the lock; a base release of ours that has a published
  patch is moved to it (``base.version``, and the version of the component it carries);
- ``release.patch`` records why it exists: each advisory fixed (id, package, old → new), the
  base move (old → new digest), and what it does not fix yet and why (``patchformat.py``).

What it cannot fix is said and left open: no version fixes it yet; the fix the advisory names
is not on the index; it comes with the base (a Debian package, what the base provides); its base
release needs a patch first. Nothing to fix: nothing is written. Whatever fails after the
manifest is written (the lock, the Dockerfile) removes what was written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...errors import ConfigError, NotFoundError
from ...evidence.osv import Advisories
from ...evidence.remedy import fixes, to_leave
from ...guard.generated import write_generated
from ...image import render as rendering
from ...image.lock import Lock
from ...image.relock import write_lock
from ...manifest import ImageSpec, Repo
from ...manifest.bump import Bump, check_bumps, child_text, write_child
from ...manifest.lines import next_patch
from ...manifest.model import canonical_name
from ...manifest.patchformat import BaseMove, Fixed, Patch, Unfixed
from ...manifest.registries import Registries
from .basewatch import Reason
from .watched import UNCOMMITTED, Open, Watched

Offers = Callable[[ImageSpec, str, str], bool]  # (spec, distribution, version) → on the index
Versions = Callable[[ImageSpec, str], tuple[str, ...]]  # (spec, distribution) → what the index has


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """What a patch of ``spec`` changes, and why; nothing written yet."""

    spec: ImageSpec
    version: str
    bumps: tuple[Bump, ...] = ()  # pip components, and the component the base carries
    constraints: tuple[str, ...] | None = None  # the new pip.constraints (None: unchanged)
    base_version: str | None = None  # our base release it moves to
    patch: Patch = field(default_factory=Patch)
    reasons: tuple[Reason, ...] = ()
    blocked: tuple[str, ...] = ()  # why a reason cannot be acted on here

    @property
    def ref(self) -> str:
        return f"{self.spec.image}:{self.version}"

    @property
    def changes(self) -> bool:
        return bool(self.bumps or self.constraints is not None or self.patch.base)


def _group(opened: tuple[Open, ...]) -> dict[tuple[str, str], list[Open]]:
    out: dict[tuple[str, str], list[Open]] = {}
    for o in opened:
        out.setdefault((o.finding.package.ecosystem, o.finding.package.name), []).append(o)
    return out


def _unfixed(o: Open, why: str) -> Unfixed:
    f = o.finding
    return Unfixed(id=f.ids[0], aliases=f.ids[1:], package=f.package.name, installed=f.package.version,
                   severity=f.level, why=why, fix=o.fix)  # fmt: skip


def _fixed(o: Open, new: str, by: str) -> Fixed:
    f = o.finding
    return Fixed(id=f.ids[0], aliases=f.ids[1:], package=f.package.name, severity=f.level,
                 old=f.package.version, new=new, by=by)  # fmt: skip


class _Planner:
    def __init__(self, spec: ImageSpec, lock: Lock, advisories: Advisories, offers: Offers,
                 versions: Versions | None) -> None:  # fmt: skip
        self.spec = spec
        self.advisories = advisories
        self.offers = offers
        self.versions = versions
        self.components = {canonical_name(c.package or c.id): c for c in spec.of_kind("pip")}
        self.layered = {canonical_name(n) for n, _ in lock.versions}
        self.from_base = {canonical_name(n) for n, _ in lock.provided} | spec.base_provides
        self.fixed: list[Fixed] = []
        self.open: list[Unfixed] = []
        self.bumps: list[Bump] = []
        self.floors: dict[str, str] = {}

    def package(self, ecosystem: str, name: str, group: list[Open]) -> None:
        fixable = [o for o in group if o.fix]
        self.open += [_unfixed(o, "no-fix") for o in group if not o.fix]
        key = canonical_name(name)
        why = None
        if ecosystem != "PyPI":
            why = "debian"
        elif key not in self.components and key in self.from_base:
            why = "base"
        elif key not in self.components and key not in self.layered:
            why = "not-installed"
        if why or not fixable:
            self.open += [_unfixed(o, why) for o in fixable if why]
            return
        package = fixable[0].finding.package
        records = to_leave(self.advisories, package, (o.finding for o in fixable))
        wanted = fixes(package, {v for o in fixable for v in o.finding.fixed}, records)
        chosen = next((v for v in wanted if self.offers(self.spec, name, v)), None)
        if chosen is None and self.versions is not None:  # none the advisories name: a later one
            chosen = next(iter(fixes(package, self.versions(self.spec, name), records)), None)
        if chosen is None:
            self.open += [_unfixed(o, "not-on-index") for o in fixable]
            return
        by = "component" if key in self.components else "constraint"
        if by == "component":
            self.bumps.append(Bump(component=self.components[key].id, version=chosen))
        else:
            self.floors[name] = chosen
        self.fixed += [_fixed(o, chosen, by) for o in fixable]

    def constraints(self) -> tuple[str, ...] | None:
        if not self.floors:
            return None
        mine = {canonical_name(n) for n in self.floors}
        kept = [c for c in self.spec.pip_constraints if canonical_name(c.partition(">=")[0]) not in mine]
        return (*kept, *(f"{n}>={v}" for n, v in sorted(self.floors.items())))


def patchable(watched: Watched) -> str | None:
    """Why the release ``watch`` found as ``watched`` gets no patch now (None: it may get one):
    superseded by a patch (patch that one), end of life. A release that is not published, or
    that could not be checked, is an error (raised): there is nothing to patch, or it is not
    known what."""
    ref = watched.ref
    if watched.state == "not published":
        msg = f"{ref} is not published at {watched.endpoint}: there is nothing to patch; release it"
        raise NotFoundError(msg)
    if watched.unchecked:
        raise watched.unchecked[0].error
    if watched.state == "superseded":
        if watched.uncommitted:  # its manifest is in the artifacts of the run that released it
            return (f"{ref} is superseded by {watched.superseded_by}, published but not committed here: "
                    f"commit its files ({UNCOMMITTED}), then patch that one")  # fmt: skip
        return f"{ref} is superseded by {watched.superseded_by}: patch that one"
    if watched.state == "end of life":
        return f"{ref} is end of life since {watched.end_of_life}: it gets no patch; nothing was written"
    return None


def prepare(repo: Repo, spec: ImageSpec, watched: Watched, advisories: Advisories, lock: Lock,
            offers: Offers, versions: Versions | None = None) -> Prepared:  # fmt: skip
    """The next patch of ``spec`` (published; ``watched`` is what ``watch`` found of it, ``lock``
    its committed lock): what it bumps, where its base moves, what stays open. ``offers``:
    whether the index has a version; ``versions``: every version it has (asked only when it has
    none of the fixes the advisories name)."""
    if watched.pending:
        msg = (
            f"{watched.pending} is prepared and not published: release it (xpu-release release "
            f"{watched.pending}), or remove its manifest to prepare another patch of {spec.ref}"
        )
        raise ConfigError(msg)
    planner = _Planner(spec, lock, advisories, offers, versions)
    for (ecosystem, name), group in sorted(_group(watched.open).items()):
        planner.package(ecosystem, name, group)
    out = Prepared(spec=spec, version=next_patch(repo, spec), reasons=watched.reasons)
    base, base_version, blocked = _base(repo, spec, watched.reasons)
    bumps = [*planner.bumps]
    if base_version is not None and spec.base.component:
        carried = _carried(repo, spec, base_version)
        if carried is not None:
            bumps.append(Bump(component=spec.base.component, version=carried))
    check_bumps(spec, tuple(b for b in bumps if b.component != spec.base.component))
    patch = Patch(fixes=tuple(planner.fixed), base=base, open=tuple(planner.open))
    return replace(out, bumps=tuple(bumps), constraints=planner.constraints(), base_version=base_version,
                   patch=patch, blocked=tuple(blocked))  # fmt: skip


def _base(
    repo: Repo, spec: ImageSpec, reasons: tuple[Reason, ...]
) -> tuple[BaseMove | None, str | None, list[str]]:
    """Where the base moves (and to which release of ours), and what must come first."""
    move, version, blocked = None, None, []
    for r in reasons:
        if r.kind == "base-moved" and r.base and r.old and r.new:
            move = BaseMove(old_ref=r.base, old_digest=r.old, new_ref=r.base, new_digest=r.new)
        elif r.kind == "base-patched" and r.base and r.moves_to and r.old and r.new:
            move = BaseMove(old_ref=r.base, old_digest=r.old, new_ref=r.moves_to, new_digest=r.new)
            version = r.moves_to.partition(":")[2]
    for r in reasons:
        if r.kind == "through-base":
            blocked.append(
                f"its base {r.moves_to} needs a patch: patch and release it first, then patch {spec.ref}"
            )
    return move, version, blocked


def _carried(repo: Repo, spec: ImageSpec, base_version: str) -> str | None:
    """The version of the component the base carries, in the base release it moves to, when it
    changed (the lock refuses a component that says another version than the base provides)."""
    mine = spec.component(spec.base.component or "")
    if mine is None or spec.base.image is None:
        return None
    theirs = repo.load(spec.base.image, base_version)
    name = canonical_name(mine.package or mine.id)
    found = next((c for c in theirs.components if canonical_name(c.package or c.id) == name), None)
    return found.version if found is not None and found.version != mine.version else None


def manifest_text(prepared: Prepared) -> str:
    spec = prepared.spec
    extra: dict[str, object] = {}
    if prepared.base_version is not None:
        extra["base"] = {"version": prepared.base_version}
    if prepared.constraints is not None:
        extra["pip"] = {"constraints": list(prepared.constraints)}
    extra["release"] = {"patch": prepared.patch.to_dict()}
    return child_text(spec.image, prepared.version, spec.version, prepared.bumps, extra)


def _as_locked(prepared: Prepared, lock: Lock) -> Prepared:
    """``prepared`` as its lock found the base: the tag moved again meanwhile (the move is to
    where the lock pins it), or moved back to the digest the release pins (no move at all)."""
    base = prepared.patch.base
    if base is None or lock.base_digest == base.new_digest:
        return prepared
    if lock.base_digest == base.old_digest and prepared.base_version is None:
        return replace(prepared, patch=replace(prepared.patch, base=None))
    return replace(prepared, patch=replace(prepared.patch, base=replace(base, new_digest=lock.base_digest)))


def write(
    repo: Repo, prepared: Prepared, lock_with: Callable[[ImageSpec], Lock], registries: Registries
) -> tuple[Path, ...]:
    """Write the patch's manifest, then its lock (``lock_with``: as ``xpu-release lock`` makes
    it) and its Dockerfile; on any failure, remove what was written. When the lock leaves the
    patch nothing to change (its only reason, a base tag that moved, moved back), what was
    written is removed and nothing is returned: nothing to fix."""
    spec = prepared.spec
    path, new = write_child(repo, spec.image, prepared.version, manifest_text(prepared))
    written = [path]
    try:
        lock = lock_with(new)
        locked = _as_locked(prepared, lock)
        if not locked.changes:
            _remove(repo, prepared, written)
            return ()
        if locked != prepared:
            write_generated(path, manifest_text(locked).encode(), root=repo.root, what="manifest")
        written.append(write_lock(repo.root, new, lock))
        rendered = rendering.render(repo.root, new, registries)
        rendering.write(rendered, repo.root)
        written.append(rendered.path)
    except BaseException:
        _remove(repo, prepared, written)
        raise
    return tuple(written)


def _remove(repo: Repo, prepared: Prepared, written: list[Path]) -> None:
    for p in written:
        p.unlink(missing_ok=True)
    folder = repo.root / "images" / prepared.spec.image / prepared.version
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
