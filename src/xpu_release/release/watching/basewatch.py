"""Whether a published release's base moved, for ``watch``: the reasons it gives to patch.

- a base image by tag (``debian/bookworm-python:12``): the tag now serves another digest than
  the committed lock pins (*base-moved*); a tag that is gone cannot be checked (exit 4, as
  ``lock --check`` says of it);
- one of our releases (``pytorch-cpu-sdk:2.13.0``): a later release of its line, a patch, is
  published (*base-patched*: the child moves to it); and when the newest published release of
  that line needs a patch itself, the child needs one *through* it (*through-base*: patch and
  release the base first, then the child moves to the new base).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from ...errors import LockError, NotFoundError, ReleaseError
from ...image.lock import load_locks
from ...manifest import ImageSpec, Repo
from ...manifest.lines import newer_in_line
from .published import Reader

Kind = Literal["advisory", "base-moved", "base-patched", "through-base"]


@dataclass(frozen=True, kw_only=True)
class Reason:
    """One reason a release needs a patch, in one line (``text``) and as fields."""

    kind: Kind
    text: str
    id: str | None = None  # advisory: its id, the package, the installed version, the fix
    package: str | None = None
    installed: str | None = None
    fix: str | None = None
    severity: str | None = None
    base: str | None = None  # base-*: the base as the release names it (repository:tag, image:version)
    moves_to: str | None = None  # base-patched, through-base: the release of ours it moves to
    old: str | None = None  # base-moved, base-patched: the digest pinned, the digest to take
    new: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _REASON_FIELDS}  # flat: no deep copy (asdict)


_REASON_FIELDS = tuple(f.name for f in fields(Reason))


@dataclass(frozen=True, kw_only=True)
class Unchecked:
    """What could not be checked (manifest, registry, sbom, vex, lock, base) and the error that
    says why, with its exit code."""

    what: str
    error: ReleaseError = field(compare=False)
    about: str = ""  # what it is about when the error is another release's (its base's)

    @property
    def message(self) -> str:
        said = self.error.message.splitlines()[0]
        return f"{self.about}: {said}" if self.about else said

    @property
    def exit_code(self) -> int:
        return self.error.exit_code


def unchecked(what: str, exc: ReleaseError) -> Unchecked:
    return Unchecked(what=what, error=exc)


class BaseUnchecked(Exception):
    """Our base release could not be checked: whether it needs a patch (and its child one
    *through* it) is unknown, so the child's answer is incomplete too, with the base's reason
    and exit code."""

    def __init__(self, ref: str, why: Unchecked) -> None:
        super().__init__(ref)
        about = f"its base release {ref} could not be checked ({why.what})"
        self.unchecked = Unchecked(what="base", error=why.error, about=about)


def base_reasons(
    repo: Repo, spec: ImageSpec, reader: Reader, needs_patch: Callable[[str], bool]
) -> tuple[list[Reason], list[Unchecked]]:
    """Why ``spec``'s base asks for a patch; what about it could not be checked.
    ``needs_patch(ref)``: whether our release ``ref`` needs a patch itself (asked parents
    first; ``BaseUnchecked`` when it could not be checked)."""
    try:
        pinned = load_locks(repo.root, spec, current=False).base_digest  # a platformed lock's: its index
    except ReleaseError as exc:
        return [], [unchecked("lock", exc)]
    named = f"{spec.base.repository}:{spec.base.tag}"
    try:
        if spec.base.image is None:
            return _tag_moved(spec, reader, pinned, named), []
        return _release_moved(repo, spec, reader, pinned, needs_patch), []
    except ReleaseError as exc:
        return [], [unchecked("base", exc)]
    except BaseUnchecked as exc:
        return [], [exc.unchecked]


def _tag_moved(spec: ImageSpec, reader: Reader, pinned: str, named: str) -> list[Reason]:
    current = reader.base_digest(spec.base.registry, spec.base.repository, spec.base.tag)
    if current is not None and current != pinned and not spec.platformed:  # linux/amd64's image in an index
        current = reader.base_image(
            spec.base.registry, spec.base.repository, spec.base.tag, spec.platforms[0]
        )
    if current is None:
        msg = (
            f"{spec.ref}: its base tag {named} is no longer served by the {spec.base.registry} registry "
            f"(the lock pins {pinned[:19]}…); point base.tag at a tag that is served, then patch"
        )
        raise LockError(msg)
    if current == pinned:
        return []
    return [Reason(kind="base-moved", base=named, old=pinned, new=current,
                   text=f"its base {named} moved: {pinned[:19]}… → {current[:19]}…")]  # fmt: skip


def _release_moved(repo: Repo, spec: ImageSpec, reader: Reader, pinned: str,
                   needs_patch: Callable[[str], bool]) -> list[Reason]:  # fmt: skip
    image, version = spec.base.repository, spec.base.tag
    base_ref = f"{image}:{version}"
    ep = reader.endpoint(spec.base.registry)
    reasons: list[Reason] = []
    target, digest = base_ref, None
    for later in reversed(newer_in_line(repo, repo.load(image, version))):
        found = reader.served(ep, image, later)
        if found is not None and not reader.withdrawn(ep, image, found):  # a withdrawn patch is no base
            target, digest = f"{image}:{later}", found
            break
    if digest is not None:
        reasons.append(Reason(kind="base-patched", base=base_ref, moves_to=target, old=pinned, new=digest,
                              text=f"its base {base_ref} is patched: {target} is published"))  # fmt: skip
    else:
        current = reader.served(ep, image, version)
        if current is not None and current != pinned and not spec.platformed:  # linux/amd64's in an index
            current = reader.base_image(spec.base.registry, image, version, spec.platforms[0])
        if current is None:
            msg = f"{spec.ref}: its base release {base_ref} is not served by {ep.name}; release it first"
            raise NotFoundError(msg)
        if current != pinned:
            reasons.append(Reason(kind="base-moved", base=base_ref, old=pinned, new=current,
                                  text=f"its base {base_ref} serves another digest: {pinned[:19]}… → "
                                  f"{current[:19]}…"))  # fmt: skip
    if needs_patch(target):
        reasons.append(Reason(kind="through-base", base=base_ref, moves_to=target,
                              text=f"its base {target} needs a patch: patch and release it first, "
                              "then this release moves to it"))  # fmt: skip
    return reasons
