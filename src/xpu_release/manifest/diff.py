"""What changed between two releases: the source of ``xpu-release diff`` and of main features."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from . import ImageSpec
from .model import Localized

ChangeKind = Literal["upgraded", "downgraded", "changed", "added", "removed"]


@dataclass(frozen=True, kw_only=True)
class Change:
    section: str  # components, env, base, os_packages; prose: features, known_issues, …
    id: str
    name: str
    kind: ChangeKind
    old: str | None
    new: str | None

    def __str__(self) -> str:
        if self.section in PROSE:
            sign = {"added": "+", "removed": "-"}.get(self.kind, "~")
            return f"{sign} {self.name}" + (" (text changed)" if self.kind == "changed" else "")
        if self.kind == "added":
            return f"+ {self.name} {self.new}"
        if self.kind == "removed":
            return f"- {self.name} {self.old}"
        if self.kind == "downgraded":
            return f"↓ {self.name} {self.old} → {self.new} (downgrade)"
        return f"~ {self.name} {self.old} → {self.new}"


PROSE = ("features", "known_issues", "quick_start_intro", "usage_advice", "bug_fixes", "highlights")


def _prose(spec: ImageSpec, section: str) -> dict[str, str]:
    """A prose section as {English heading: all its text}, in order (items without a title are
    keyed by their English text)."""
    items: tuple[Any, ...] = (
        getattr(spec.release, section) if section in ("bug_fixes", "highlights") else getattr(spec, section)
    )
    out: dict[str, str] = {}
    for item in items:
        if isinstance(item, Localized):
            out[item.en] = item.en + "\n" + item.zh
        else:
            out[item.title.en] = repr(item)
    return out


def prose_diff(old: ImageSpec, new: ImageSpec) -> tuple[Change, ...]:
    """Prose the notes show: items added, removed, or reworded between two releases."""
    changes: list[Change] = []
    for section in PROSE:
        before, after = _prose(old, section), _prose(new, section)
        for key, text in after.items():
            if key not in before:
                changes.append(Change(section=section, id=key, name=key, kind="added", old=None, new=None))
            elif before[key] != text:
                changes.append(Change(section=section, id=key, name=key, kind="changed", old=None, new=None))
        for key in before.keys() - after.keys():
            changes.append(Change(section=section, id=key, name=key, kind="removed", old=None, new=None))
    return tuple(changes)


def _direction(old: str, new: str) -> ChangeKind:
    from packaging.version import InvalidVersion, Version

    try:
        return "upgraded" if Version(new) > Version(old) else "downgraded"
    except InvalidVersion:
        return "changed"  # non-PEP 440 versions (v1.4.3-8): no order to claim


def diff(old: ImageSpec, new: ImageSpec) -> tuple[Change, ...]:
    changes: list[Change] = []
    olds = {c.id: c for c in old.components}
    news = {c.id: c for c in new.components}
    for cid, c in news.items():
        if cid not in olds:
            changes.append(
                Change(
                    section="components",
                    id=cid,
                    name=c.name,
                    kind="added",
                    old=None,
                    new=c.display_version,
                )
            )
        elif olds[cid].version != c.version:
            kind: ChangeKind = _direction(olds[cid].version, c.version)
            changes.append(
                Change(
                    section="components",
                    id=cid,
                    name=c.name,
                    kind=kind,
                    old=olds[cid].display_version,
                    new=c.display_version,
                )
            )
    for cid, c in olds.items():
        if cid not in news:
            changes.append(
                Change(
                    section="components",
                    id=cid,
                    name=c.name,
                    kind="removed",
                    old=c.display_version,
                    new=None,
                )
            )
    changes += _platform_changes(old, new)
    old_base = f"{old.base.registry}/{old.base.repository}:{old.base.tag}"
    new_base = f"{new.base.registry}/{new.base.repository}:{new.base.tag}"
    if old_base != new_base:
        changes.append(
            Change(
                section="base",
                id="base",
                name="base image",
                kind="changed",
                old=old_base,
                new=new_base,
            )
        )
    oenv, nenv = dict(old.env), dict(new.env)
    for k in sorted(oenv.keys() | nenv.keys()):
        if oenv.get(k) != nenv.get(k):
            kind = "added" if k not in oenv else "removed" if k not in nenv else "changed"
            changes.append(Change(section="env", id=k, name=k, kind=kind, old=oenv.get(k), new=nenv.get(k)))
    for p in sorted(set(new.os_packages) - set(old.os_packages)):
        changes.append(Change(section="os_packages", id=p, name=p, kind="added", old=None, new=p))
    for p in sorted(set(old.os_packages) - set(new.os_packages)):
        changes.append(Change(section="os_packages", id=p, name=p, kind="removed", old=p, new=None))
    return tuple(changes) + prose_diff(old, new)


def _platform_changes(old: ImageSpec, new: ImageSpec) -> list[Change]:
    """The platforms added and removed, and each component's version on a platform both build
    for where it is not the component's version (``platform_versions``) and changed; none when
    neither release declares platforms."""
    changes = [Change(section="platforms", id=p.name, name=p.name, kind="added", old=None, new=p.name)
               for p in new.platforms if p not in old.platforms]  # fmt: skip
    changes += [Change(section="platforms", id=p.name, name=p.name, kind="removed", old=p.name, new=None)
                for p in old.platforms if p not in new.platforms]  # fmt: skip
    olds = {c.id: c for c in old.components}
    both = [p for p in new.platforms if p in old.platforms]
    for c in (c for c in new.components if c.id in olds):
        was = olds[c.id]
        for p in both:
            before, after = was.version_on(p), c.version_on(p)
            if before != after and (before, after) != (was.version, c.version):
                name = f"{c.name} ({p.name})"
                changes.append(Change(section="components", id=f"{c.id}@{p.name}", name=name,
                                      kind=_direction(before, after), old=before, new=after))  # fmt: skip
    return changes


def declared_upgrades(spec: ImageSpec) -> tuple[Change, ...]:
    """For a release with no parent manifest: the changes it declares (``release.upgraded``,
    ``release.added``), in the order of its components."""
    previous = dict(spec.release.previous)
    kinds: dict[str, ChangeKind] = {
        **{cid: "upgraded" for cid in spec.release.upgraded},
        **{cid: "added" for cid in spec.release.added},
    }
    return tuple(
        Change(
            section="components",
            id=c.id,
            name=c.name,
            kind=kinds[c.id],
            old=previous.get(c.id) if kinds[c.id] == "upgraded" else None,
            new=c.display_version,
        )
        for c in spec.components
        if c.id in kinds
    )
