"""The rules that span a manifest's keys, one by one (``rules.RULES``), each on the smallest
manifest that shows it. (Through `validate`, with file:line locations: test_validate.py.)"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from xpu_release.manifest import rules
from xpu_release.manifest.types import Checker
from xpu_release.manifest.yamlsrc import Source

BASE = {"registry": "hub", "repository": "debian/bookworm-python", "tag": "12", "python": "/usr/bin/python3"}
VALID: dict[str, Any] = {"base": BASE, "components": {"six": {"kind": "pip", "version": "1.16.0"}}}
NAMES = frozenset({"hub", "public", "vpc"})


def problems(rule: rules.Rule, names: frozenset[str] | None = NAMES, **changes: Any) -> list[tuple[str, str]]:
    """(key path, message) of each problem ``rule`` finds in ``VALID`` with ``changes``."""
    data = {**copy.deepcopy(VALID), **changes}
    checker = Checker(Source(file="m.yaml", data=data))
    rule(rules.Resolved(data, names), checker)
    return [(p.path, p.message) for p in checker.problems]


@pytest.mark.parametrize("rule", rules.RULES, ids=lambda r: r.__name__)
def test_a_valid_manifest_breaks_no_rule(rule: rules.Rule) -> None:
    assert problems(rule) == []


# --- the base -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "found"),
    [
        ({"image": "pytorch-cpu-sdk", "version": "2.13.0", "python": "/usr/bin/python3"}, []),
        ({"image": "pytorch-cpu-sdk", "python": "/usr/bin/python3"},
         [("base.image", "a base that is another family's release needs its version too")]),
        ({"image": "pytorch-cpu-sdk", "version": "2.13.0", "tag": "x"},
         [("base.tag", "give either image + version or registry + repository + tag, not tag too")]),
    ],
)  # fmt: skip
def test_a_family_base_names_its_release(base: dict[str, str], found: list[tuple[str, str]]) -> None:
    assert problems(rules.a_family_base_names_its_release, base=base) == found


def test_a_base_image_names_its_registry_repository_and_tag_and_no_version() -> None:
    found = problems(rules.a_base_image_names_where_it_is, base={"repository": "debian", "version": "12"})

    assert found == [
        ("base", "missing required key 'registry' (or name a family release: image + version)"),
        ("base", "missing required key 'tag' (or name a family release: image + version)"),
        ("base.version", "version goes with image (a family release); a base image has a tag"),
    ]


def test_the_base_registry_is_one_the_registries_file_names_with_a_hint() -> None:
    found = problems(rules.the_base_registry_is_in_the_registries_file, base={**BASE, "registry": "hubb"})

    said = "'hubb' is no registry of the registries file (known: hub, public, vpc); did you mean 'hub'?"
    assert found == [("base.registry", said)]


def test_a_base_with_no_registry_is_served_by_public() -> None:
    base = {k: v for k, v in BASE.items() if k != "registry"}

    assert problems(rules.the_base_registry_is_in_the_registries_file, base=base) == []
    assert problems(rules.the_base_registry_is_in_the_registries_file, frozenset({"hub"}), base=base) == [
        ("base.registry", "'public' is no registry of the registries file (known: hub)")
    ]
    assert (
        problems(rules.the_base_registry_is_in_the_registries_file, None, base=base) == []
    )  # not known here


def test_no_layer_replaces_what_the_base_provides() -> None:
    found = problems(rules.no_layer_replaces_what_the_base_provides, base={**BASE, "provides": ["Six"]})

    assert [p for p, _ in found] == ["components.six"]
    assert "which the base provides (base.provides)" in found[0][1]


@pytest.mark.parametrize(
    ("component", "kinds", "found"),
    [
        ("sdk", {"sdk": "base"}, []),
        ("nothing", {}, [("base.component", "names no component (have: six)")]),
        ("six", {}, [("base.component", "'six' is a pip component, not base")]),
    ],
)
def test_base_component_names_a_component_of_kind_base(
    component: str, kinds: dict[str, str], found: list[tuple[str, str]]
) -> None:
    components = {**VALID["components"], **{cid: {"kind": k, "version": "1"} for cid, k in kinds.items()}}

    got = problems(rules.base_component_is_a_base_component, base={**BASE, "component": component},
                   components=components)  # fmt: skip

    assert got == found


def test_a_base_component_not_named_by_the_base_is_refused() -> None:
    components = {**VALID["components"], "sdk": {"kind": "base", "version": "1"}}

    assert problems(rules.every_base_component_is_the_base, components=components) == [
        ("components.sdk.kind", "a base component must be named by base.component")
    ]
    named = {**BASE, "component": "sdk"}
    assert problems(rules.every_base_component_is_the_base, base=named, components=components) == []


# --- components -----------------------------------------------------------------------------------


def test_pip_pins_are_pep_440_versions() -> None:
    components = {
        "six": {"kind": "pip", "version": "1.16 beta"},
        "tool": {"kind": "artifact", "version": "v1 x"},
    }

    assert problems(rules.pip_pins_are_pep_440_versions, components=components) == [
        ("components.six.version", "'1.16 beta' is not a PEP 440 version")  # an artifact's is free text
    ]


def test_each_package_is_pinned_once_by_its_canonical_name() -> None:
    components = {"six": {"kind": "pip", "version": "1.16.0"},
                  "six-again": {"kind": "pip", "package": "Six", "version": "1.17.0"},
                  "removed": None}  # fmt: skip

    assert problems(rules.each_package_is_pinned_once, components=components) == [
        ("components.six-again", "installs 'six', already pinned by 'six'")
    ]


def test_the_release_section_names_components_of_this_image() -> None:
    release = {"upgraded": ["six", "vllm"], "added": ["ray"], "previous": {"six": "1.15.0", "gone": "1"}}

    assert problems(rules.release_notes_name_components, release=release) == [
        ("release.upgraded[1]", "'vllm' is not a component of this image"),
        ("release.added[0]", "'ray' is not a component of this image"),
        ("release.previous.gone", "'gone' is not a component of this image"),
    ]


def test_a_known_issue_scope_is_a_version_specifier() -> None:
    issues = [{"applies": {"six": "<2"}}, {"applies": {"six": "about 1.16"}}]

    found = problems(rules.known_issue_scopes_are_version_ranges, known_issues=issues)

    assert [p for p, _ in found] == ["known_issues[1].applies.six"]
    assert "is not a version specifier" in found[0][1]


def test_env_leaves_what_the_template_sets_alone() -> None:
    env = {"PATH": "/x", "PIP_CONSTRAINT": "/y", "VIRTUAL_ENV": None, "OMP_NUM_THREADS": "4"}

    assert problems(rules.env_leaves_the_templates_variables_alone, env=env) == [
        ("env.PATH", "PATH is set by the template; it cannot be overridden here"),
        ("env.PIP_CONSTRAINT", "PIP_CONSTRAINT is set by the template; it cannot be overridden here"),
    ]


def test_check_runs_every_rule() -> None:
    data = {**copy.deepcopy(VALID), "env": {"PATH": "/x"}, "release": {"added": ["ray"]}}
    checker = Checker(Source(file="m.yaml", data=data))

    rules.check(rules.Resolved(data, NAMES), checker)

    assert [p.path for p in checker.problems] == ["release.added[0]", "env.PATH"]


# --- what a patch claims, what a version is called ------------------------------------------------


def fix(**more: str) -> dict[str, Any]:
    return {"id": "CVE-2026-0001", "package": "six", "old": "1.16.0", "new": "1.17.0", **more}


@pytest.mark.parametrize(
    ("claimed", "pip", "found"),
    [
        ([fix(new="1.16.0")], None, []),  # the component is at `new`
        ([fix(new="1.16")], None, []),  # the same version, as PEP 440 compares them
        ([fix(by="constraint", package="urllib3", new="2.5.0")], {"constraints": ["urllib3>=2.5.0"]}, []),
        ([fix()], None, ["claims CVE-2026-0001 fixed in six 1.16.0 → 1.17.0 by: component, but a pip "
                         "component says 1.16.0"]),
        ([fix(package="ray")], None, ["but a pip component does not name it"]),
        ([fix(by="constraint", package="Urllib3", new="2.5.0")], {"constraints": ["urllib3>=2.4"]},
         ["by: constraint, but pip.constraints says 2.4"]),
        ([fix(by="constraint", new="1.17.0")], None, ["but pip.constraints does not name it"]),
    ],
)  # fmt: skip
def test_a_patch_makes_every_fix_it_claims(claimed: list[Any], pip: Any, found: list[str]) -> None:
    changes: dict[str, Any] = {"release": {"patch": {"fixes": claimed}}}
    if pip is not None:
        changes["pip"] = pip

    said = problems(rules.a_patch_makes_the_fixes_it_claims, **changes)

    assert [p for p, _ in said] == ["release.patch.fixes[0].new"] * len(found)
    assert all(f in m for f, (_, m) in zip(found, said, strict=True)), said


@pytest.mark.parametrize(
    ("version", "tags", "where"),
    [
        ("25.03", ["latest"], None),
        ("25.03-latest", ["latest"], "version"),
        ("latest", [], "version"),
        ("25.03", ["latest", "25.03"], "floating_tags[1]"),
    ],
)
def test_a_version_is_never_a_floating_tag(version: str, tags: list[str], where: str | None) -> None:
    said = problems(rules.a_version_is_never_a_floating_tag, version=version, floating_tags=tags)

    assert [p for p, _ in said] == ([where] if where else [])
