"""What a patch release says about itself: the ``release.patch`` section ``xpu-release patch``
writes (each advisory it fixes, the base it moves, what it does not fix yet), its values, and
the rule of patch numbers.

A patch of ``25.03`` is ``25.03.1``, then ``25.03.2``; of ``2.13.0`` it is ``2.13.0.1``: the
version of the release it patches (its **line**) and one more number, from 1 to ``MAX_PATCH``.
``versions.version_key`` sorts them after the line's release, in numeric order, and before its
next regular version (``25.03 < 25.03.1 < 25.03.10 < 25.04``, ``2.13.0 < 2.13.0.1 < 2.13.1``,
``25.03-py3 < 25.03-py3.10``, ``2.14.0-rc.1 < 2.14.0-rc.1.1 < 2.14.0-rc.2``). A release is a
patch when it carries ``release.patch``; its line is then its version without the last number,
and it ``extends`` its line's release or an earlier patch of it. The notes of a patch say why
it exists from this section.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .types import Enum, List, Nullable, Obj, Str

LEVELS = ("low", "medium", "high", "critical", "unknown")
# Why a finding stays open in a patch: no version fixes it yet; the fix the advisory names is
# not on the package index; it comes with the base image (its tag has not moved, or the base
# provides it); a Debian package (fixed with the base or os_packages); not installed by the lock.
WHY_OPEN = ("no-fix", "not-on-index", "base", "debian", "not-installed", "waits-for-base")

ADVISORY_ID = Str(pattern=r"[A-Za-z0-9][A-Za-z0-9._:\-]*", what="an advisory id", hint="e.g. CVE-2026-1234",
                  max_len=100)  # fmt: skip
PACKAGE = Str(pattern=r"[A-Za-z0-9](?:[A-Za-z0-9._+\-]*[A-Za-z0-9])?", what="a package name", max_len=100)
# A PyPI or a Debian version (1.6.0, 3.0.20-1~deb12u3, 1:2.3-4): shown in the notes, never built.
PACKAGE_VERSION = Str(pattern=r"[A-Za-z0-9][A-Za-z0-9._+~:\-]*", what="a package version", max_len=100)
DIGEST = Str(pattern=r"sha256:[0-9a-f]{64}", what="a digest", hint="sha256:<64 hex digits>", max_len=71)
BASE_REF = Str(pattern=r"[a-z0-9][a-z0-9._/\-]*:[A-Za-z0-9_][A-Za-z0-9_.\-]*", what="a base image",
               hint="repository:tag, or image:version of a release of ours", max_len=300)  # fmt: skip
_PINNED = Obj(fields={"ref": BASE_REF, "digest": DIGEST}, required=("ref", "digest"))
# What names a finding, in what it fixes and in what it leaves open.
_FINDING = {
    "id": ADVISORY_ID,
    "aliases": List(item=ADVISORY_ID, unique=True),
    "package": PACKAGE,
    "severity": Enum(choices=LEVELS),
}

PATCH = Obj(
    fields={
        "fixes": List(
            item=Obj(
                fields={
                    **_FINDING,
                    "old": PACKAGE_VERSION,
                    "new": PACKAGE_VERSION,
                    "by": Enum(
                        choices=("component", "constraint"),
                        description="component: its pin moved; constraint: pip.constraints raises a "
                        "dependency no component pins.",
                    ),
                },
                required=("id", "package", "old", "new"),
            ),
            description="Each advisory this release fixes: the package, from which version to which.",
        ),
        "base": Nullable(
            inner=Obj(fields={"old": _PINNED, "new": _PINNED}, required=("old", "new")),
            description="The base this release moves to: its tag now serves another digest, or a "
            "patch of our base release is published.",
        ),
        "open": List(
            item=Obj(
                fields={
                    **_FINDING,
                    "installed": PACKAGE_VERSION,
                    "why": Enum(choices=WHY_OPEN),
                    "fix": Nullable(inner=PACKAGE_VERSION, description="The fix the advisory names."),
                },
                required=("id", "package", "installed", "why"),
            ),
            description="What this release does not fix yet, and why.",
        ),
    },
    description="Written by `xpu-release patch`: why this patch release exists. Its notes say it.",
)


@dataclass(frozen=True, kw_only=True)
class Fixed:
    id: str
    aliases: tuple[str, ...]
    package: str
    severity: str
    old: str
    new: str
    by: str  # component | constraint


@dataclass(frozen=True, kw_only=True)
class BaseMove:
    old_ref: str
    old_digest: str
    new_ref: str
    new_digest: str


@dataclass(frozen=True, kw_only=True)
class Unfixed:
    id: str
    aliases: tuple[str, ...]
    package: str
    installed: str
    severity: str
    why: str
    fix: str | None = None


@dataclass(frozen=True, kw_only=True)
class Patch:
    """Why a patch release exists (``release.patch``)."""

    fixes: tuple[Fixed, ...] = ()
    base: BaseMove | None = None
    open: tuple[Unfixed, ...] = ()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Patch:
        base = d.get("base")
        return cls(
            fixes=tuple(
                Fixed(id=f["id"], aliases=tuple(f.get("aliases") or ()), package=f["package"],
                      severity=f.get("severity") or "unknown", old=f["old"], new=f["new"],
                      by=f.get("by") or "component")
                for f in d.get("fixes") or ()
            ),
            base=BaseMove(old_ref=base["old"]["ref"], old_digest=base["old"]["digest"],
                          new_ref=base["new"]["ref"], new_digest=base["new"]["digest"]) if base else None,
            open=tuple(
                Unfixed(id=u["id"], aliases=tuple(u.get("aliases") or ()), package=u["package"],
                        installed=u["installed"], severity=u.get("severity") or "unknown", why=u["why"],
                        fix=u.get("fix"))
                for u in d.get("open") or ()
            ),
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """As the manifest writes it (``from_dict`` reads it back the same)."""
        out: dict[str, Any] = {
            "fixes": [{"id": f.id, "aliases": list(f.aliases), "package": f.package, "severity": f.severity,
                       "old": f.old, "new": f.new, "by": f.by} for f in self.fixes],
            "base": None if self.base is None else {
                "old": {"ref": self.base.old_ref, "digest": self.base.old_digest},
                "new": {"ref": self.base.new_ref, "digest": self.base.new_digest}},
            "open": [{"id": u.id, "aliases": list(u.aliases), "package": u.package, "installed": u.installed,
                      "severity": u.severity, "why": u.why, "fix": u.fix} for u in self.open],
        }  # fmt: skip
        return out


# --- numbering ------------------------------------------------------------------------------

LINE_TAG_SUFFIX = "-latest"  # a line's floating tag: 25.03-latest (lines.line_tag)
MAX_PATCH = 999_999  # patch numbers of one line: 1 to 999999, never with a leading 0
_PATCH_RX = re.compile(rf"(?P<line>.+)\.(?P<n>[1-9][0-9]{{0,{len(str(MAX_PATCH)) - 1}}})")


def split_patch(version: str) -> tuple[str, int] | None:
    """``25.03.2`` → (``25.03``, 2): the line and the patch number, if ``version`` can be one."""
    m = _PATCH_RX.fullmatch(version)
    return (m["line"], int(m["n"])) if m else None


def line_of_version(version: str, is_patch: bool) -> str:
    """The line a release belongs to: its own version, or (a patch) the one it patches."""
    split = split_patch(version) if is_patch else None
    return split[0] if split is not None else version


def numbering_problem(version: str, extends: Any, exists: Callable[[str], bool]) -> str | None:
    """Why a release that carries ``release.patch`` is not numbered as a patch (None: it is):
    its version is ``<line>.<n>``, its line's release exists, and it extends the line's release
    or an earlier patch of it. ``exists``: whether a version of the image has a manifest."""
    split = split_patch(version)
    if split is None or not exists(split[0]):
        return (
            f"a patch is numbered <release>.<n> after the release it patches (25.03 → 25.03.1); "
            f"{version!r} names no release of this image before its last number"
        )
    line, n = split
    of = split_patch(extends) if isinstance(extends, str) else None
    if extends != line and not (of is not None and of[0] == line and of[1] < n):
        return f"a patch of {line} extends {line} or an earlier patch of it, not {extends!r}"
    return None
