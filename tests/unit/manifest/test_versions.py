"""The order of an image's versions (``manifest/versions.py``) for every kind of line: numbers as
numbers, a patch after what it patches and in numeric order, a SemVer pre-release before its
release, a variant after it; a total order on every string a version may be. And the names a
version may not take: a floating tag's, a line's tag."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xpu_release.manifest import Repo
from xpu_release.manifest.lines import next_patch
from xpu_release.manifest.loader import VERSION_PATTERN
from xpu_release.manifest.patchformat import MAX_PATCH
from xpu_release.manifest.versions import version_key

from ..helpers import run, write_manifest

CPU = "training-cpu-pytorch"

numbers = st.integers(0, 10**6).map(str) | st.sampled_from(["03", "007", "0"])
cores = st.lists(numbers, min_size=1, max_size=4).map(".".join)
words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=6)
pre_releases = st.tuples(
    st.lists(numbers, min_size=3, max_size=3).map(".".join),
    st.lists(words, min_size=1, max_size=3).map(".".join),
).map(lambda t: f"{t[0]}-{t[1]}")
variants = st.tuples(st.lists(numbers, min_size=2, max_size=2).map(".".join), words).map(
    lambda t: f"{t[0]}-{t[1]}"
)
lines = cores | pre_releases | variants
anything = st.from_regex(VERSION_PATTERN, fullmatch=True)


@pytest.mark.parametrize(
    "ordered",
    [
        ["25.03", "25.03.1", "25.03.9", "25.03.10", "25.04"],
        ["25.03", "25.03-py3", "25.03-py3.1", "25.03-py3.9", "25.03-py3.10", "25.04"],  # a variant: after
        [
            "2.14.0-rc.1",
            "2.14.0-rc.1.1",
            "2.14.0-rc.1.9",
            "2.14.0-rc.1.10",
            "2.14.0-rc.2",
            "2.14.0",
            "2.14.0.1",
        ],
        ["2.14.0-alpha", "2.14.0-alpha.1", "2.14.0-alpha.beta", "2.14.0-beta.2", "2.14.0-beta.11", "2.14.0"],
        ["1.0", "1.0.0", "1.0.1", "1.10", "9.0", "latest-cpu"],  # no numbered start: after every numbered one
    ],
)
def test_versions_sort_as_the_rule_says(ordered: list[str]) -> None:
    assert sorted(reversed(ordered), key=version_key) == ordered


@given(line=lines, n=st.integers(1, MAX_PATCH - 1), more=st.integers(1, MAX_PATCH))
def test_the_patches_of_any_line_sort_after_it_and_in_numeric_order(line: str, n: int, more: int) -> None:
    m = min(n + more, MAX_PATCH)

    assert version_key(line) < version_key(f"{line}.{n}") < version_key(f"{line}.{m}")


@given(core=cores, n=st.integers(1, MAX_PATCH), bump=st.integers(0, 3))
def test_a_patch_of_a_release_sorts_before_its_next_regular_version(core: str, n: int, bump: int) -> None:
    parts = core.split(".")
    parts[min(bump, len(parts) - 1)] = str(int(parts[min(bump, len(parts) - 1)]) + 1)
    following = ".".join(parts)

    assert version_key(f"{core}.{n}") < version_key(following)


@given(a=anything, b=anything, c=anything)
def test_every_version_has_a_place_in_one_total_order(a: str, b: str, c: str) -> None:
    ka, kb, kc = version_key(a), version_key(b), version_key(c)

    assert (ka == kb) == (a == b)
    assert not (ka < kb < kc) or ka < kc


def test_a_line_whose_patch_numbers_are_used_up_is_refused_with_what_to_do(repo: Path) -> None:
    write_manifest(repo, CPU, f"25.03.{MAX_PATCH}",
                   f'image: {CPU}\nversion: "25.03.{MAX_PATCH}"\nextends: "25.03"\n')  # fmt: skip
    r = Repo(repo)

    with pytest.raises(Exception, match=r"no patch number left.*release a new version") as caught:
        next_patch(r, r.load(CPU, "25.03"))
    assert getattr(caught.value, "exit_code", None) == 3


@pytest.mark.parametrize("version", ["25.03-latest", "latest", "cpu-latest"])
def test_a_version_named_like_a_floating_tag_is_refused_at_its_line(repo: Path, version: str) -> None:
    write_manifest(repo, CPU, version, f'image: {CPU}\nversion: "{version}"\nextends: "25.03"\n')

    result = run(repo, "validate", f"{CPU}:{version}")

    assert result.exit_code == 2
    assert f"manifests/{CPU}/{version}.yaml:2:" in result.stderr
    assert "named like a floating tag" in result.stderr


@pytest.mark.parametrize(
    ("tags", "problem"),
    [
        ('["25.04"]', "is this release's version tag"),
        ('[latest, "25.03"]', "is the version tag of training-cpu-pytorch:25.03"),
        ('[latest, "25.03-latest"]', "is the line's tag of training-cpu-pytorch:25.03"),
    ],
)
def test_a_floating_tag_that_is_a_version_tag_or_another_lines_tag_is_refused(
    repo: Path, tags: str, problem: str
) -> None:
    write_manifest(
        repo, CPU, "25.04", f'image: {CPU}\nversion: "25.04"\nextends: "25.03"\nfloating_tags: {tags}\n'
    )

    result = run(repo, "validate", f"{CPU}:25.04")

    assert result.exit_code == 2
    assert f"manifests/{CPU}/25.04.yaml:4:" in result.stderr
    assert problem in result.stderr
