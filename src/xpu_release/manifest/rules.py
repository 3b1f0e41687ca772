"""The rules of a manifest that span keys, each a small named function (``RULES``): the schema
checks every key on its own; these check what keys say of one another (references between
sections, PEP 440 pins, unique packages, the registry the base comes from). The loader runs them
on a manifest the schema passed, ``extends:`` already applied; every rule reports each problem it
finds, located, so ``validate`` lists them all at once. Each is tested on its own
(tests/unit/manifest/test_manifest_rules.py).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from . import evaluation, platforms
from .inherit import scope_problem
from .model import DEFAULT_BASE_REGISTRY, canonical_name
from .patchformat import LINE_TAG_SUFFIX
from .support import Support, as_date, calver_month
from .types import Checker

# Set by the Dockerfile template; a manifest's env may not change them.
TEMPLATE_ENV = frozenset({"PATH", "VIRTUAL_ENV", "PIP_CONSTRAINT"})


@dataclass(frozen=True)
class Resolved:
    """A manifest as the rules read it: resolved (``extends:`` applied), its shape checked."""

    data: dict[str, Any]
    registry_names: frozenset[str] | None = None  # the registries file's (None: not checked here)

    @property
    def base(self) -> dict[str, Any]:
        return self.data["base"]  # type: ignore[no-any-return]

    @property
    def components(self) -> dict[str, Any]:
        """The components it has (an entry a child removed with ``null`` is gone)."""
        return {k: v for k, v in self.data["components"].items() if v is not None}

    @property
    def pip(self) -> dict[str, Any]:
        return {k: v for k, v in self.components.items() if v["kind"] == "pip"}


Rule = Callable[[Resolved, Checker], None]


def a_family_base_names_its_release(m: Resolved, c: Checker) -> None:
    """A base that is another family's release (``image``) names its ``version``, and no
    repository or tag besides."""
    if m.base.get("image") is None:
        return
    if m.base.get("version") is None:
        c.fail(("base", "image"), "a base that is another family's release needs its version too")
    for key in ("repository", "tag"):
        if m.base.get(key) is not None:
            c.fail(
                ("base", key), f"give either image + version or registry + repository + tag, not {key} too"
            )


def a_base_image_names_where_it_is(m: Resolved, c: Checker) -> None:
    """A base image (not a family release) names its registry, repository and tag; a version
    goes with a family release only."""
    if m.base.get("image") is not None:
        return
    for key in ("registry", "repository", "tag"):
        if m.base.get(key) is None:
            c.fail(("base",), f"missing required key {key!r} (or name a family release: image + version)")
    if m.base.get("version") is not None:
        c.fail(("base", "version"), "version goes with image (a family release); a base image has a tag")


def the_base_registry_is_in_the_registries_file(m: Resolved, c: Checker) -> None:
    """The registry the base is served from (``public`` when none is named) is one the
    registries file names."""
    alias = m.base.get("registry") or DEFAULT_BASE_REGISTRY
    if m.registry_names is None or alias in m.registry_names:
        return
    close = difflib.get_close_matches(alias, sorted(m.registry_names), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    known = ", ".join(sorted(m.registry_names))
    c.fail(("base", "registry"), f"{alias!r} is no registry of the registries file (known: {known}){hint}")


def no_layer_replaces_what_the_base_provides(m: Resolved, c: Checker) -> None:
    """A pip component never installs a distribution the base provides (``base.provides``)."""
    provided = {canonical_name(p) for p in m.base.get("provides") or ()}
    for cid, comp in m.pip.items():
        if canonical_name(comp.get("package") or cid) in provided:
            c.fail(("components", cid),
                   f"installs {comp.get('package') or cid}, which the base provides (base.provides); a layer "
                   "may never replace it: make it a `kind: base` component, or drop it")  # fmt: skip


def base_component_is_a_base_component(m: Resolved, c: Checker) -> None:
    """``base.component`` names a component of this image, of kind ``base``."""
    cid = m.base.get("component")
    if cid is None:
        return
    if cid not in m.components:
        c.fail(("base", "component"), f"names no component (have: {', '.join(m.components)})")
    elif m.components[cid]["kind"] != "base":
        c.fail(("base", "component"), f"{cid!r} is a {m.components[cid]['kind']} component, not base")


def every_base_component_is_the_base(m: Resolved, c: Checker) -> None:
    """A component of kind ``base`` is the one ``base.component`` names."""
    for cid, comp in m.components.items():
        if comp["kind"] == "base" and cid != m.base.get("component"):
            c.fail(("components", cid, "kind"), "a base component must be named by base.component")


def pip_pins_are_pep_440_versions(m: Resolved, c: Checker) -> None:
    for cid, comp in m.pip.items():
        try:
            Version(comp["version"])
        except InvalidVersion:
            c.fail(("components", cid, "version"), f"{comp['version']!r} is not a PEP 440 version")


def each_package_is_pinned_once(m: Resolved, c: Checker) -> None:
    """Two pip components never install the same distribution (by its canonical name)."""
    seen: dict[str, str] = {}
    for cid, comp in m.pip.items():
        pkg = canonical_name(comp.get("package") or cid)
        if pkg in seen:
            c.fail(("components", cid), f"installs {pkg!r}, already pinned by {seen[pkg]!r}")
        seen[pkg] = cid


def release_notes_name_components(m: Resolved, c: Checker) -> None:
    """``release.upgraded``, ``release.added`` and ``release.previous`` name components of this
    image."""
    release = m.data.get("release") or {}
    for key in ("upgraded", "added"):
        for i, cid in enumerate(release.get(key) or ()):
            if cid not in m.components:
                c.fail(("release", key, i), f"{cid!r} is not a component of this image")
    for cid in release.get("previous") or {}:
        if cid not in m.components:
            c.fail(("release", "previous", cid), f"{cid!r} is not a component of this image")


def known_issue_scopes_are_version_ranges(m: Resolved, c: Checker) -> None:
    """A known issue's ``applies:`` gives each component a version specifier."""
    for i, issue in enumerate(m.data.get("known_issues") or ()):
        for cid, spec in (issue.get("applies") or {}).items():
            bad = scope_problem(spec)
            if bad:
                c.fail(("known_issues", i, "applies", cid), bad)


def env_leaves_the_templates_variables_alone(m: Resolved, c: Checker) -> None:
    """``env`` does not set what the Dockerfile template sets (``TEMPLATE_ENV``)."""
    env = {k for k, v in (m.data.get("env") or {}).items() if v is not None}
    for name in sorted(TEMPLATE_ENV & env):
        c.fail(("env", name), f"{name} is set by the template; it cannot be overridden here")


def support_months_count_from_a_date(m: Resolved, c: Checker) -> None:
    """``support.months`` counts from the release's date: ``support.released``, or the month a
    calendar version (YY.MM) names; a release with neither (and no ``until``) has no date."""
    support = m.data.get("support") or {}
    if "months" not in support or support.get("until") is not None or support.get("released") is not None:
        return
    if calver_month(str(m.data.get("version"))) is None:
        version = m.data.get("version")
        c.fail(("support", "months"), f"counts from the release's date, and {version!r} is no YY.MM version "
               "to read one from: give support.released (YYYY-MM-DD) or support.until")  # fmt: skip


def the_end_of_support_is_a_day(m: Resolved, c: Checker) -> None:
    """The end-of-life date ``support.months`` makes is a day the calendar counts (up to the year
    9999), so ``list``, ``status`` and the notes can say it."""
    support = m.data.get("support") or {}
    if support.get("until") is not None or not isinstance(support.get("months"), int):
        return
    try:
        policy = Support(months=support["months"], released=as_date(support.get("released")))
        policy.end(str(m.data.get("version")))
    except (ValueError, OverflowError, TypeError):
        c.fail(("support", "months"), f"{support['months']} months after the release's date is past the year "
               "9999: give an earlier support.released or fewer months, or support.until")  # fmt: skip


def a_version_is_never_a_floating_tag(m: Resolved, c: Checker) -> None:
    """A version tag never moves and a floating tag does: a version is not ``latest``, does not
    end in ``-latest`` (a line's tag: ``25.03-latest`` follows 25.03 and its patches), and is
    none of its own ``floating_tags``. (That a floating tag is no other release's version is
    checked where the repository is known: the loader.)"""
    version = str(m.data.get("version"))
    tags = list(m.data.get("floating_tags") or ())
    if version == "latest" or version.endswith(LINE_TAG_SUFFIX):
        c.fail(("version",), f"{version!r} is named like a floating tag (latest, <line>{LINE_TAG_SUFFIX}), "
               "which moves, and a version tag never does: name the version otherwise")  # fmt: skip
    elif version in tags:
        c.fail(("floating_tags", tags.index(version)), f"{version!r} is this release's version tag, which "
               "never moves: drop it from floating_tags")  # fmt: skip


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def a_patch_makes_the_fixes_it_claims(m: Resolved, c: Checker) -> None:
    """Each fix ``release.patch`` claims (its notes say it) is one the manifest makes: ``by:
    component``, a pip component installs the package at ``new``; ``by: constraint``,
    ``pip.constraints`` raises it to ``new`` (``NAME>=NEW``)."""
    patch = (m.data.get("release") or {}).get("patch") or {}
    pins = {canonical_name(comp.get("package") or cid): str(comp["version"]) for cid, comp in m.pip.items()}
    floors: dict[str, str] = {}
    for text in (m.data.get("pip") or {}).get("constraints") or ():
        name, sep, version = str(text).partition(">=")
        if sep:
            floors[canonical_name(name.strip())] = version.strip()
    for i, fix in enumerate(patch.get("fixes") or ()):
        name, new, by = canonical_name(str(fix["package"])), str(fix["new"]), fix.get("by") or "component"
        made = pins if by == "component" else floors
        if name in made and _same_version(made[name], new):
            continue
        where = "a pip component" if by == "component" else "pip.constraints"
        has = f"says {made[name]}" if name in made else "does not name it"
        c.fail(("release", "patch", "fixes", i, "new"), f"claims {fix['id']} fixed in {fix['package']} "
               f"{fix['old']} → {new} by: {by}, but {where} {has}: make the fix (pin {new}), or drop the "
               "claim: the notes say what this section says")  # fmt: skip


def the_evaluation_holds_together(m: Resolved, c: Checker) -> None:
    """``evaluation:`` names each variant once, has a command, and accepts only a regression it
    can find (``evaluation.RULES``, beside its format)."""
    for rule in evaluation.RULES:
        rule(m.data, c)


def platform_versions_name_declared_platforms(m: Resolved, c: Checker) -> None:
    """A component's ``platform_versions`` names platforms the release declares (``platforms``)."""
    platforms.platform_versions_name_declared_platforms(m.data, c)


RULES: tuple[Rule, ...] = (
    a_family_base_names_its_release,
    a_base_image_names_where_it_is,
    the_base_registry_is_in_the_registries_file,
    no_layer_replaces_what_the_base_provides,
    base_component_is_a_base_component,
    every_base_component_is_the_base,
    pip_pins_are_pep_440_versions,
    each_package_is_pinned_once,
    release_notes_name_components,
    known_issue_scopes_are_version_ranges,
    env_leaves_the_templates_variables_alone,
    support_months_count_from_a_date,
    the_end_of_support_is_a_day,
    a_version_is_never_a_floating_tag,
    a_patch_makes_the_fixes_it_claims,
    the_evaluation_holds_together,
    platform_versions_name_declared_platforms,
)


def check(m: Resolved, c: Checker) -> None:
    """Every rule, in order; their problems go to ``c``."""
    for rule in RULES:
        rule(m, c)
