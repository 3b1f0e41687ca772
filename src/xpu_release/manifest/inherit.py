"""What a release takes from the one it ``extends:``, and what it must not take blindly.

The merge itself is key by key (``null`` removes an inherited entry). On top of it:

- anything that names the version follows the version: an inherited title that names the
  parent's version names the child's;
- a component whose pin moves gets the new pin as its display version (an inherited
  ``noted_as`` belonged to the old pin);
- an artifact whose version or URL moves must say its new URL and sha256: the inherited ones
  are another file's;
- prose marked ``only_in: <version>`` holds for that release only and is not inherited;
  a known issue with ``applies:`` leaves the notes of releases outside its range;
- inherited prose that names a version this release no longer has is reported (a notice,
  not an error: ``validate`` prints it)."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from .yamlsrc import KeyPath

# Prose lists whose items are inherited as a whole list, and may be scoped.
PROSE_LISTS = ("features", "known_issues", "quick_start_intro", "usage_advice")


@dataclass(frozen=True, kw_only=True)
class Finding:
    path: KeyPath
    message: str


@dataclass(frozen=True, kw_only=True)
class Inherited:
    data: dict[str, Any]
    errors: tuple[Finding, ...]
    notices: tuple[Finding, ...]


# The maps whose entries a child removes by writing ``null`` (a component, a variable, a key of
# the base when it moves from a base image to a family release);
# anywhere else ``null`` is a value (``sha256: null``: not yet published).
REMOVABLE = (("components",), ("env",), ("base",))


def merge(parent: Any, child: Any, path: tuple[str, ...] = ()) -> Any:
    """Maps merge key by key; anything else replaces."""
    if isinstance(parent, dict) and isinstance(child, dict):
        out = dict(parent)
        for k, v in child.items():
            if v is None and path in REMOVABLE:
                out.pop(k, None)
                continue
            out[k] = merge(out[k], v, (*path, str(k))) if k in out else copy.deepcopy(v)
        return out
    return copy.deepcopy(child)


def _names(text: str, version: str) -> bool:
    """True if ``text`` names ``version`` as a token (25.03 is not named by 125.03 or 25.031)."""
    return re.search(rf"(?<![\w.]){re.escape(version)}(?![\w])(?!\.\d)", text) is not None


def _swap(text: str, old: str, new: str) -> str:
    return re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w])(?!\.\d)", new, text)


def applies(scope: dict[str, str], versions: dict[str, str]) -> bool:
    """Does a known issue scoped to ``scope`` ({component: specifier}) apply to these pins?
    A component the release does not have does not match; a version that is not PEP 440
    matches only ``==`` that exact string."""
    for cid, spec in scope.items():
        have = versions.get(cid)
        if have is None:
            return False
        try:
            if not SpecifierSet(spec).contains(Version(have), prereleases=True):
                return False
        except (InvalidSpecifier, InvalidVersion):
            if spec.strip().removeprefix("==").strip() != have:
                return False
    return True


def scope_problem(spec: str) -> str | None:
    try:
        SpecifierSet(spec)
    except InvalidSpecifier:
        exact = spec.strip().removeprefix("==").strip()
        if spec.strip().startswith("==") and exact:
            return None
        return f"{spec!r} is not a version specifier (e.g. '==0.7.3', '<0.8', '>=2.43,<2.45')"
    return None


def _texts(item: Any) -> list[str]:
    """Every string of a prose item (titles and texts in every language)."""
    if isinstance(item, str):
        return [item]
    if isinstance(item, dict):
        return [t for k, v in item.items() if k not in ("applies", "only_in", "refs") for t in _texts(v)]
    if isinstance(item, list):
        return [t for v in item for t in _texts(v)]
    return []


def _label(item: Any) -> str:
    """How a notice names a prose item: by its English title, if it has one."""
    title = item.get("title") if isinstance(item, dict) else None
    en = title.get("en") if isinstance(title, dict) else None
    return f"{en!r}" if isinstance(en, str) else "this item"


def inherit(parent: dict[str, Any], child: dict[str, Any]) -> Inherited:
    """``child`` (as written) on top of ``parent`` (resolved), with the rules above."""
    old_v, new_v = str(parent.get("version")), str(child.get("version"))
    data: dict[str, Any] = merge(parent, child)
    errors: list[Finding] = []
    notices: list[Finding] = []

    # The title names the release.
    if "title" not in child or not isinstance(child.get("title"), dict):
        title = data.get("title")
        if isinstance(title, dict):
            data["title"] = {k: _swap(v, old_v, new_v) if isinstance(v, str) else v for k, v in title.items()}
    else:
        own = child["title"]
        data["title"] = {
            k: (v if k in own or not isinstance(v, str) else _swap(v, old_v, new_v))
            for k, v in data["title"].items()
        }

    # Components whose pin moved.
    old_comps = parent.get("components") or {}
    moved: dict[str, tuple[str, str]] = {}
    for cid, own in (child.get("components") or {}).items():
        before, after = old_comps.get(cid), data.get("components", {}).get(cid)
        if not (isinstance(own, dict) and isinstance(before, dict) and isinstance(after, dict)):
            continue
        if "version" in own and own["version"] != before.get("version"):
            moved[cid] = (str(before.get("version")), str(own["version"]))
            if "noted_as" not in own:
                after.pop("noted_as", None)
        if after.get("kind") == "artifact":
            url_moved = "url" in own and own["url"] != before.get("url")
            if cid in moved and "url" not in own:
                errors.append(
                    Finding(
                        path=("components", cid, "version"),
                        message=(
                            f"moves {cid} from {moved[cid][0]} to {moved[cid][1]} but inherits the url "
                            f"and sha256 of {moved[cid][0]}; give the url and sha256 of {moved[cid][1]} "
                            "here (sha256: null only while the artifact is unpublished)"
                        ),
                    )
                )
            elif (cid in moved or url_moved) and "sha256" not in own:
                errors.append(
                    Finding(
                        path=("components", cid, "url"),
                        message=(
                            f"a new url for {cid} needs its own sha256; the inherited one is of "
                            f"{before.get('url')}"
                        ),
                    )
                )

    own_comps = child.get("components") or {}
    changed = moved or any(v is None or cid not in old_comps for cid, v in own_comps.items())
    if not changed and not (child.get("release") or {}).get("highlights"):
        notices.append(
            Finding(
                path=("extends",),
                message=(
                    f"{new_v} changes no pin and has no release.highlights: its notes will have "
                    "nothing under Main Features"
                ),
            )
        )

    # Prose: scoped items, and items that name what this release no longer has.
    versions = {
        cid: str(c.get("version")) for cid, c in (data.get("components") or {}).items() if isinstance(c, dict)
    }
    # component → (the names its old pin went by, what this release has instead)
    stale: dict[str, tuple[tuple[str, ...], str]] = {}
    for cid, c in old_comps.items():
        if not isinstance(c, dict) or (cid in versions and cid not in moved):
            continue
        names = tuple(dict.fromkeys(str(n) for n in (c.get("noted_as"), c.get("version")) if n))
        stale[cid] = (names, versions.get(cid, "none"))
    for key in PROSE_LISTS:
        if key in child or not isinstance(data.get(key), list):
            continue
        kept = []
        for i, item in enumerate(data[key]):
            only = item.get("only_in") if isinstance(item, dict) else None
            if only is not None and only != new_v:
                notices.append(
                    Finding(
                        path=(key, i),
                        message=f"{_label(item)} holds for {only} only; {new_v} does not inherit it",
                    )
                )
                continue
            kept.append(item)
            scope = item.get("applies") if isinstance(item, dict) else None
            if isinstance(scope, dict):
                continue  # scoped on purpose: the notes keep it only where it applies
            texts = _texts(item)
            for cid, (olds, new) in sorted(stale.items()):
                old = next((o for o in olds if any(_names(t, o) for t in texts)), None)
                if old is not None:
                    notices.append(
                        Finding(
                            path=(key, i),
                            message=(
                                f"{_label(item)}, inherited by {new_v}, names {cid} {old}, but "
                                f"{new_v} has {new}: scope it (applies: {{{cid}: '=={old}'}}) or rewrite "
                                f"it in {new_v}"
                            ),
                        )
                    )
            if only is None and any(_names(t, old_v) for t in texts):
                notices.append(
                    Finding(
                        path=(key, i),
                        message=(
                            f"{_label(item)}, inherited by {new_v}, names release {old_v}: mark "
                            f"it only_in: '{old_v}', or rewrite it in {new_v}"
                        ),
                    )
                )
        data[key] = kept
    return Inherited(data=data, errors=tuple(errors), notices=tuple(notices))
