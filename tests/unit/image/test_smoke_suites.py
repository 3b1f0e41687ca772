"""The smoke run as laid out for a container: the generic checks come with the package, the
image's own from its repository, from a clone in any folder (the run itself, in a container, is
tests/integration/test_build_and_smoke.py's)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from xpu_release.errors import ConfigError
from xpu_release.guard.limits import MAX_FOLDER_DEPTH
from xpu_release.image import smoke
from xpu_release.manifest import Repo

from ..guard.hostile import chain

ROOT = Path(__file__).resolve().parents[3]
REF = "pytorch-cpu-sdk:2.13.0"


def clone(root: Path) -> Path:
    """The repository's manifests, templates and images (their own checks included), and no
    test suite: a repository that uses xpu-release, wherever it is."""
    for name in ("manifests", "templates", "images", "schema"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "registries.yaml", root / "registries.yaml")
    return root


def collected(tmp_path: Path) -> list[str]:
    root = clone(tmp_path / "somewhere" / "else")
    spec = Repo(root).load_ref(REF)
    (tmp_path / "run").mkdir()
    run = smoke.stage_run(root, spec, "sha256:" + "1" * 64, (("torch", "2.13.0+cpu"),), tmp_path / "run")
    argv = run.argv("local://", "--collect-only")
    out = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_the_generic_checks_ship_with_the_package() -> None:
    assert smoke.CHECKS.is_dir()
    assert smoke.CHECKS.is_relative_to(Path(__import__("xpu_release").__file__).parent)
    assert not (ROOT / "tests" / "smoke").exists()


def test_a_clone_without_a_test_suite_gets_the_generic_checks_and_its_images_own(tmp_path: Path) -> None:
    ids = collected(tmp_path)

    # The generic checks, parametrized from the manifest and the lock's provided distributions
    # (testinfra puts the host first in each id).
    generic = "checks/test_manifest_checks.py::test_"
    assert f"{generic}pin_is_installed_at_exactly_its_version[local-torch]" in ids
    assert f"{generic}a_distribution_the_base_provides_is_unchanged[local-torch]" in ids
    assert f"{generic}tool_is_on_path[local-python3]" in ids
    # The image's own, from the repository.
    assert any(i.startswith("images/pytorch-cpu-sdk/tests/test_sdk.py::") for i in ids)


def test_what_the_checks_hash_to_does_not_depend_on_where_the_repository_is(tmp_path: Path) -> None:
    here, there = clone(tmp_path / "a"), clone(tmp_path / "b" / "c")
    spec = Repo(here).load_ref(REF)

    assert smoke.tests_sha256(here, spec) == smoke.tests_sha256(there, Repo(there).load_ref(REF))
    (there / "images" / "pytorch-cpu-sdk" / "tests" / "test_sdk.py").write_text("# changed\n")
    assert smoke.tests_sha256(here, spec) != smoke.tests_sha256(there, Repo(there).load_ref(REF))


def test_checks_nested_deeper_than_a_walk_goes_are_a_configuration_error_naming_the_suite(
    tmp_path: Path,
) -> None:
    # Path.rglob recursed once per level: 1,100 folders ended the hash in a RecursionError (exit 70).
    here = clone(tmp_path / "a")
    spec = Repo(here).load_ref(REF)
    chain(here / "images" / "pytorch-cpu-sdk" / "tests" / "deep", MAX_FOLDER_DEPTH + 3)

    with pytest.raises(ConfigError, match=r"^images/pytorch-cpu-sdk/tests: 1 folder\(s\) of the checks"):
        smoke.tests_sha256(here, spec)


def test_checks_in_nested_folders_are_hashed(tmp_path: Path) -> None:
    here = clone(tmp_path / "a")
    spec = Repo(here).load_ref(REF)
    before = smoke.tests_sha256(here, spec)
    nested = here / "images" / "pytorch-cpu-sdk" / "tests" / "more" / "test_more.py"
    nested.parent.mkdir()
    nested.write_text("def test_more() -> None: ...\n")

    assert smoke.tests_sha256(here, spec) != before
