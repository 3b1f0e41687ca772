"""What a release inherits from the one it extends, rule by rule (``inherit.RULES``): each rule
on the smallest parent and child that show it. (Through the CLI, on real manifests:
test_second_release.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from xpu_release.manifest import inherit
from xpu_release.manifest.inherit import Case, Finding, Prose

VLLM = {"kind": "pip", "version": "0.7.3", "noted_as": "0.7.3+ali"}
BLOB = {"kind": "artifact", "version": "1.0", "url": "https://x.invalid/blob-1.0.tgz", "sha256": "a" * 64}


def case(parent: dict[str, Any] | None = None, **child: Any) -> Case:
    """``child`` (version 25.04) on ``parent`` (version 25.03, with vLLM and an artifact)."""
    base = {"version": "25.03", "components": {"vllm": dict(VLLM), "blob": dict(BLOB)}, **(parent or {})}
    return Case.of(base, {"version": "25.04", **child})


def messages(found: list[Finding]) -> list[str]:
    return [f.message for f in found]


# --- the title ------------------------------------------------------------------------------------


def test_an_inherited_title_names_the_new_version() -> None:
    c = case({"title": {"en": "training 25.03", "zh": "训练 25.03"}})

    assert inherit.title_names_this_release(c) == []
    assert c.data["title"] == {"en": "training 25.04", "zh": "训练 25.04"}


def test_a_title_the_child_writes_is_its_own_language_by_language() -> None:
    c = case({"title": {"en": "training 25.03", "zh": "训练 25.03"}}, title={"en": "spring 25.03 refresh"})

    inherit.title_names_this_release(c)

    assert c.data["title"] == {"en": "spring 25.03 refresh", "zh": "训练 25.04"}


# --- moved pins -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("own", "noted_as"),
    [
        ({"version": "0.8.0"}, None),  # moved: the old display version is gone
        ({"version": "0.8.0", "noted_as": "0.8.0+ali"}, "0.8.0+ali"),  # moved, and says its own
        ({"version": "0.7.3"}, "0.7.3+ali"),  # not moved
    ],
)
def test_a_moved_pin_drops_the_display_version_of_the_old_one(
    own: dict[str, str], noted_as: str | None
) -> None:
    c = case(components={"vllm": own})

    assert inherit.a_moved_pin_drops_its_noted_as(c) == []
    assert c.data["components"]["vllm"].get("noted_as") == noted_as


@pytest.mark.parametrize(
    ("own", "path", "says"),
    [
        ({"version": "1.1"}, ("components", "blob", "version"), "inherits the url and sha256 of 1.0"),
        (
            {"version": "1.1", "url": "https://x.invalid/1.1.tgz"},
            ("components", "blob", "url"),
            "needs its own sha256",
        ),
        (
            {"url": "https://x.invalid/other.tgz"},
            ("components", "blob", "url"),
            "the inherited one is of https://x.",
        ),
    ],
)
def test_a_moved_artifact_must_bring_its_own_url_and_sha256(
    own: dict[str, str], path: tuple[str, ...], says: str
) -> None:
    (found,) = inherit.a_moved_artifact_brings_its_own_url_and_sha256(case(components={"blob": own}))

    assert found.error
    assert found.path == path
    assert says in found.message


@pytest.mark.parametrize(
    "own",
    [
        {"version": "1.1", "url": "https://x.invalid/1.1.tgz", "sha256": "b" * 64},
        {"version": "1.1", "url": "https://x.invalid/1.1.tgz", "sha256": None},  # not yet published
        {"version": "1.0"},
    ],
)
def test_an_artifact_that_moves_with_its_url_and_sha256_or_stays_is_fine(own: dict[str, Any]) -> None:
    assert inherit.a_moved_artifact_brings_its_own_url_and_sha256(case(components={"blob": own})) == []


def test_a_moved_pip_pin_needs_no_url() -> None:
    assert (
        inherit.a_moved_artifact_brings_its_own_url_and_sha256(
            case(components={"vllm": {"version": "0.8.0"}})
        )
        == []
    )


# --- a release that changes nothing ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("child", "noticed"),
    [
        ({}, True),
        ({"components": {"vllm": {"version": "0.7.3"}}}, True),  # a pin written again, unmoved
        ({"release": {"highlights": [{"en": "faster", "zh": "更快"}]}}, False),
        ({"components": {"vllm": {"version": "0.8.0"}}}, False),
        ({"components": {"blob": None}}, False),  # removed
        ({"components": {"ray": {"kind": "pip", "version": "2.43.0"}}}, False),  # added
    ],
)
def test_a_release_that_changes_nothing_is_noticed(child: dict[str, Any], noticed: bool) -> None:
    found = inherit.a_release_that_changes_nothing_says_so(case(**child))

    assert [(f.path, f.error) for f in found] == ([(("extends",), False)] if noticed else [])


# --- inherited prose ------------------------------------------------------------------------------


def prose(item: Any, index: int = 0) -> Prose:
    return Prose(key="known_issues", index=index, item=item)


@pytest.mark.parametrize(("only_in", "held"), [("25.03", True), ("25.04", False), (None, False)])
def test_prose_held_for_another_release_is_not_inherited(only_in: str | None, held: bool) -> None:
    item = {"title": {"en": "a slow start"}, **({"only_in": only_in} if only_in else {})}

    found = inherit.prose_held_for_another_release(case(), prose(item, 2))

    assert messages(found) == (
        ["'a slow start' holds for 25.03 only; 25.04 does not inherit it"] if held else []
    )
    assert all(f.path == ("known_issues", 2) for f in found)


@pytest.mark.parametrize(
    ("child", "text", "says"),
    [
        (
            {"components": {"vllm": {"version": "0.8.0"}}},
            "vLLM 0.7.3 leaks memory",
            "names vllm 0.7.3, but 25.04 has 0.8.0",
        ),
        (
            {"components": {"vllm": {"version": "0.8.0"}}},
            "vLLM 0.7.3+ali leaks",
            "names vllm 0.7.3+ali",
        ),  # noted_as
        ({"components": {"vllm": None}}, "vLLM 0.7.3 leaks memory", "names vllm 0.7.3, but 25.04 has none"),
        ({"components": {"vllm": {"version": "0.8.0"}}}, "vLLM 10.7.3 is fine", None),  # another version
        ({}, "vLLM 0.7.3 leaks memory", None),  # the pin did not move
    ],
)
def test_inherited_prose_that_names_a_replaced_pin_is_noticed(
    child: dict[str, Any], text: str, says: str | None
) -> None:
    found = inherit.prose_that_names_a_replaced_pin(case(**child), prose({"text": {"en": text}}))

    assert len(found) == (1 if says else 0)
    assert all(says in f.message and "applies: {vllm: '==" in f.message for f in found if says)


def test_scoped_prose_is_left_where_it_applies() -> None:
    item = {"text": {"en": "vLLM 0.7.3 and 25.03 leak"}, "applies": {"vllm": "==0.7.3"}}
    c = case(components={"vllm": {"version": "0.8.0"}})

    assert inherit.prose_that_names_a_replaced_pin(c, prose(item)) == []
    assert inherit.prose_that_names_the_parent_release(c, prose(item)) == []


@pytest.mark.parametrize(
    ("item", "noticed"),
    [
        ({"text": {"zh": "25.03 的已知问题"}}, True),
        ({"text": {"en": "fixed since 125.03 and in 25.031"}}, False),  # other versions
        ({"text": {"en": "since 25.03"}, "only_in": "25.04"}, False),  # marked: it knows its release
    ],
)
def test_inherited_prose_that_names_the_parent_release_is_noticed(
    item: dict[str, Any], noticed: bool
) -> None:
    found = inherit.prose_that_names_the_parent_release(case(), prose(item))

    said = (
        "this item, inherited by 25.04, names release 25.03: mark it only_in: '25.03', or rewrite it in 25.04"
    )
    assert messages(found) == ([said] if noticed else [])


def test_inherited_prose_drops_what_is_held_for_another_release_and_reads_the_rest() -> None:
    items = [
        {"title": {"en": "old"}, "only_in": "25.03"},
        {"title": {"en": "kept"}, "text": {"en": "see 25.03"}},
        {"title": {"en": "also kept"}},
    ]
    c = case({"known_issues": items, "features": [{"title": {"en": "f"}, "only_in": "25.03"}]},
             features=[{"title": {"en": "the child's own"}}])  # fmt: skip

    found = inherit.inherited_prose(c)

    assert [i["title"]["en"] for i in c.data["known_issues"]] == ["kept", "also kept"]
    assert c.data["features"] == [{"title": {"en": "the child's own"}}]  # written, not inherited
    assert [f.path for f in found] == [("known_issues", 0), ("known_issues", 1)]  # the parent's places


def test_inherit_runs_every_rule_and_tells_errors_from_notices() -> None:
    got = inherit.inherit(
        {"version": "25.03", "title": {"en": "t 25.03"}, "components": {"blob": dict(BLOB)},
         "known_issues": [{"text": {"en": "blob 1.0 is slow"}}]},
        {"version": "25.04", "components": {"blob": {"version": "1.1"}}},
    )  # fmt: skip

    assert got.data["title"] == {"en": "t 25.04"}
    assert [f.path for f in got.errors] == [("components", "blob", "version")]
    assert [f.path for f in got.notices] == [("known_issues", 0)]
    assert inherit.RULES[-1] is inherit.inherited_prose  # prose is read after the pins are known
