"""What a release takes from the one it ``extends:``, and what it must not take blindly.

The merge itself is key by key (``null`` removes an inherited entry). On top of it, each a
named rule of ``RULES`` (tested one by one in tests/unit/manifest/test_inherit_rules.py):

- anything that names the version follows the version: an inherited title that names the
  parent's version names the child's;
- a component whose pin moves gets the new pin as its display version (an inherited
  ``noted_as`` belonged to the old pin), and installs it on every platform (inherited
  ``platform_versions`` belonged to the old pin too);
- an artifact whose version or URL moves must say its new URL and sha256: the inherited ones
  are another file's;
- a support date (``support.until``, ``support.released``) is its release's own: only the
  family's policy (``support.months``) is inherited;
- prose marked ``only_in: <version>`` holds for that release only and is not inherited;
  a known issue with ``applies:`` leaves the notes of releases outside its range;
- inherited prose that names a version this release no longer has is reported (a notice,
  not an error: ``validate`` prints it);
- a regression a release accepts (``evaluation.accepted``) is its own, never inherited."""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable
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
    error: bool = False  # an error stops the manifest; a notice is for a person to check


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


def _components(manifest: dict[str, Any]) -> dict[str, Any]:
    return manifest.get("components") or {}


# --- the rules ---------------------------------------------------------------------------------
#
# Each rule reads one ``Case`` (the parent as resolved, the child as written, their merge) and
# says what it finds; a rule that rewrites what the child inherits edits ``case.data``, the merge.
# ``RULES`` runs them in order; ``ITEM_RULES`` run on each inherited prose item, in order.


@dataclass(frozen=True)
class Case:
    parent: dict[str, Any]
    child: dict[str, Any]
    data: dict[str, Any]  # the merge: what the child inherits, as the rules leave it

    @classmethod
    def of(cls, parent: dict[str, Any], child: dict[str, Any]) -> Case:
        return cls(parent=parent, child=child, data=merge(parent, child))

    @property
    def old_version(self) -> str:
        return str(self.parent.get("version"))

    @property
    def new_version(self) -> str:
        return str(self.child.get("version"))

    @functools.cached_property
    def moved(self) -> dict[str, tuple[str, str]]:
        """component → (old pin, new pin), for each component the child re-pins."""
        out: dict[str, tuple[str, str]] = {}
        before = _components(self.parent)
        for cid, own in _components(self.child).items():
            old = before.get(cid)
            if not (isinstance(own, dict) and isinstance(old, dict) and "version" in own):
                continue
            if own["version"] != old.get("version"):
                out[cid] = (str(old.get("version")), str(own["version"]))
        return out


@dataclass(frozen=True, kw_only=True)
class Prose:
    """One inherited item of a prose list (``PROSE_LISTS``), where the parent has it."""

    key: str
    index: int
    item: Any

    @property
    def path(self) -> KeyPath:
        return (self.key, self.index)

    @property
    def only_in(self) -> Any:
        return self.item.get("only_in") if isinstance(self.item, dict) else None

    @property
    def scoped(self) -> bool:
        """Scoped on purpose (``applies:``): the notes keep it only where it applies."""
        return isinstance(self.item, dict) and isinstance(self.item.get("applies"), dict)


Rule = Callable[[Case], list[Finding]]
ItemRule = Callable[[Case, Prose], list[Finding]]


def title_names_this_release(case: Case) -> list[Finding]:
    """An inherited title that names the parent's version names the child's (a title the child
    writes is its own, language by language)."""
    title = case.data.get("title")
    if not isinstance(title, dict):
        return []
    written = case.child.get("title")
    own: dict[str, Any] = written if isinstance(written, dict) else {}
    old, new = case.old_version, case.new_version
    case.data["title"] = {
        k: v if k in own or not isinstance(v, str) else _swap(v, old, new) for k, v in title.items()
    }
    return []


def a_moved_pin_drops_its_noted_as(case: Case) -> list[Finding]:
    """A component whose pin moves is shown with its new pin: the inherited ``noted_as`` belonged
    to the old one."""
    for cid in case.moved:
        after = _components(case.data).get(cid)
        if isinstance(after, dict) and "noted_as" not in _components(case.child)[cid]:
            after.pop("noted_as", None)
    return []


def a_moved_pin_drops_its_platform_versions(case: Case) -> list[Finding]:
    """A component whose pin moves installs the new pin on every platform: the versions another
    platform installed instead (``platform_versions``) belonged to the old pin."""
    for cid in case.moved:
        after = _components(case.data).get(cid)
        if isinstance(after, dict) and "platform_versions" not in _components(case.child)[cid]:
            after.pop("platform_versions", None)
    return []


def a_moved_artifact_brings_its_own_url_and_sha256(case: Case) -> list[Finding]:
    """An artifact whose version or URL moves says its new URL and sha256: the inherited ones
    are another file's."""
    errors = []
    for cid, own in _components(case.child).items():
        before, after = _components(case.parent).get(cid), _components(case.data).get(cid)
        if not (isinstance(own, dict) and isinstance(before, dict) and isinstance(after, dict)):
            continue
        if after.get("kind") != "artifact":
            continue
        url_moved = "url" in own and own["url"] != before.get("url")
        if cid in case.moved and "url" not in own:
            old, new = case.moved[cid]
            errors.append(Finding(path=("components", cid, "version"), error=True, message=(
                f"moves {cid} from {old} to {new} but inherits the url and sha256 of {old}; give the "
                f"url and sha256 of {new} here (sha256: null only while the artifact is unpublished)"
            )))  # fmt: skip
        elif (cid in case.moved or url_moved) and "sha256" not in own:
            errors.append(Finding(path=("components", cid, "url"), error=True, message=(
                f"a new url for {cid} needs its own sha256; the inherited one is of {before.get('url')}"
            )))  # fmt: skip
    return errors


def support_dates_belong_to_their_release(case: Case) -> list[Finding]:
    """``support.until`` and ``support.released`` are dates of the release that writes them: a
    release that extends it inherits the family's policy (``support.months``) only."""
    support, own = case.data.get("support"), case.child.get("support")
    if not isinstance(support, dict):
        return []
    written = own if isinstance(own, dict) else {}
    kept = {k: v for k, v in support.items() if k not in ("until", "released") or k in written}
    if kept:
        case.data["support"] = kept
    else:
        case.data.pop("support")
    return []


def a_release_that_changes_nothing_says_so(case: Case) -> list[Finding]:
    """A release that moves, adds and removes no pin and has no ``release.highlights`` would have
    nothing under Main Features."""
    before, own = _components(case.parent), _components(case.child)
    changed = case.moved or any(v is None or cid not in before for cid, v in own.items())
    if changed or (case.child.get("release") or {}).get("highlights"):
        return []
    message = (
        f"{case.new_version} changes no pin and has no release.highlights: its notes will have "
        "nothing under Main Features"
    )
    return [Finding(path=("extends",), message=message)]


def prose_held_for_another_release(case: Case, prose: Prose) -> list[Finding]:
    """Prose marked ``only_in: <version>`` holds for that release only: the child does not
    inherit it (``inherited_prose`` drops an item this rule finds)."""
    if prose.only_in is None or prose.only_in == case.new_version:
        return []
    message = f"{_label(prose.item)} holds for {prose.only_in} only; {case.new_version} does not inherit it"
    return [Finding(path=prose.path, message=message)]


def prose_that_names_a_replaced_pin(case: Case, prose: Prose) -> list[Finding]:
    """Unscoped inherited prose that names a pin (or its ``noted_as``) this release moved or
    removed."""
    if prose.scoped:
        return []
    now = {cid: str(c.get("version")) for cid, c in _components(case.data).items() if isinstance(c, dict)}
    texts = _texts(prose.item)
    out = []
    for cid, c in sorted(_components(case.parent).items()):
        if not isinstance(c, dict) or (cid in now and cid not in case.moved):
            continue
        names = dict.fromkeys(str(n) for n in (c.get("noted_as"), c.get("version")) if n)
        old = next((o for o in names if any(_names(t, o) for t in texts)), None)
        if old is not None:
            new_v, has = case.new_version, now.get(cid, "none")
            out.append(Finding(path=prose.path, message=(
                f"{_label(prose.item)}, inherited by {new_v}, names {cid} {old}, but {new_v} has {has}: "
                f"scope it (applies: {{{cid}: '=={old}'}}) or rewrite it in {new_v}"
            )))  # fmt: skip
    return out


def prose_that_names_the_parent_release(case: Case, prose: Prose) -> list[Finding]:
    """Unscoped inherited prose, not marked ``only_in``, that names the release it came from."""
    old, new = case.old_version, case.new_version
    if prose.scoped or prose.only_in is not None or not any(_names(t, old) for t in _texts(prose.item)):
        return []
    message = (
        f"{_label(prose.item)}, inherited by {new}, names release {old}: mark it only_in: '{old}', "
        f"or rewrite it in {new}"
    )
    return [Finding(path=prose.path, message=message)]


def an_accepted_regression_holds_for_its_release_only(case: Case) -> list[Finding]:
    """The regressions a release accepts (``evaluation.accepted``) are its own: a release that
    extends it accepts only what it says itself."""
    inherited, own = case.data.get("evaluation"), case.child.get("evaluation")
    if not isinstance(inherited, dict) or not inherited.get("accepted"):
        return []
    if isinstance(own, dict) and "accepted" in own:
        return []
    # A new mapping: the merge may hold the parent's own one, which its other children read.
    case.data["evaluation"] = {k: v for k, v in inherited.items() if k != "accepted"}
    message = (
        f"the regressions {case.old_version} accepts (evaluation.accepted) are its own; "
        f"{case.new_version} does not inherit them"
    )
    return [Finding(path=("evaluation",), message=message)]


ITEM_RULES: tuple[ItemRule, ...] = (prose_that_names_a_replaced_pin, prose_that_names_the_parent_release)


def inherited_prose(case: Case) -> list[Finding]:
    """Each prose list the child inherits as a whole: an item held for another release is
    dropped, the others are kept and read by ``ITEM_RULES``."""
    found: list[Finding] = []
    for key in PROSE_LISTS:
        items = case.data.get(key)
        if key in case.child or not isinstance(items, list):
            continue
        kept = []
        for index, item in enumerate(items):
            prose = Prose(key=key, index=index, item=item)
            held = prose_held_for_another_release(case, prose)
            found += held
            if not held:
                kept.append(item)
                found += [f for rule in ITEM_RULES for f in rule(case, prose)]
        case.data[key] = kept
    return found


RULES: tuple[Rule, ...] = (
    title_names_this_release,
    a_moved_pin_drops_its_noted_as,
    a_moved_pin_drops_its_platform_versions,
    a_moved_artifact_brings_its_own_url_and_sha256,
    support_dates_belong_to_their_release,
    a_release_that_changes_nothing_says_so,
    an_accepted_regression_holds_for_its_release_only,
    inherited_prose,
)


def inherit(parent: dict[str, Any], child: dict[str, Any]) -> Inherited:
    """``child`` (as written) on top of ``parent`` (resolved), with ``RULES``."""
    case = Case.of(parent, child)
    found = [f for rule in RULES for f in rule(case)]
    return Inherited(data=case.data, errors=tuple(f for f in found if f.error),
                     notices=tuple(f for f in found if not f.error))  # fmt: skip
