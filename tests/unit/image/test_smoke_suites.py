"""The smoke run as laid out for a container: the generic checks come with the package, the
image's own from its repository, from a clone in any folder (the run itself, in a container, is
tests/integration/test_build_and_smoke.py's)."""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import subprocess
from collections.abc import Iterator
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


class _Engine:
    """Containers by name only: the suites below never reach their host."""

    def __init__(self, cpus: int) -> None:
        self.cpus, self.started = cpus, 0

    def cpu_count(self) -> int:
        return self.cpus

    @contextlib.contextmanager
    def container(self, image: str, *, purpose: str) -> Iterator[str]:
        self.started += 1
        yield f"c{self.started}"


def _two_suites(tmp_path: Path) -> smoke.StagedRun:
    """A suite that says 300 KiB and passes (more than a pipe holds), and one of helpers only."""
    root = clone(tmp_path / "repo")
    run = smoke.stage_run(root, Repo(root).load_ref(REF), "sha256:" + "1" * 64, (), tmp_path)
    loud, quiet = tmp_path / "suites" / "loud", tmp_path / "suites" / "quiet"
    loud.mkdir(parents=True)
    quiet.mkdir()
    loud_test = "def test_loud():\n    for _ in range(3000):\n        print('x' * 100)\n    assert False\n"
    (loud / "test_loud.py").write_text(loud_test)
    (quiet / "conftest.py").write_text("HELPER = 1\n")
    return dataclasses.replace(run, suites=(loud, quiet))


def test_each_suite_runs_in_a_container_of_its_own_and_a_suite_without_tests_fails_nothing(
    tmp_path: Path,
) -> None:
    run, engine = _two_suites(tmp_path), _Engine(cpus=2)
    shown: list[str] = []

    codes, said = smoke._run_suites(run, engine, "sha256:" + "1" * 64, "x:1", shown.append)  # type: ignore[arg-type]

    assert engine.started == 2
    assert codes[1] == 0  # helpers only: nothing to fail
    assert codes[0] != 0  # the loud test fails, and is reported
    assert "[loud] " in said
    assert any(line.startswith("[quiet] ") for line in shown)


def test_a_screen_that_breaks_stops_no_suite(tmp_path: Path) -> None:
    run = _two_suites(tmp_path)

    def broken(line: str) -> None:  # the terminal went away once the runs had started
        if line.startswith("["):
            raise BrokenPipeError(32, "Broken pipe")

    codes, said = smoke._run_suites(run, _Engine(cpus=2), "sha256:" + "1" * 64, "x:1", broken)  # type: ignore[arg-type]

    assert len(codes) == 2
    assert said.count("x" * 100) >= 3000  # the whole output was read: no run was left on a full pipe


def test_on_an_engine_of_one_cpu_every_suite_runs_in_one_container(tmp_path: Path) -> None:
    run, engine = _two_suites(tmp_path), _Engine(cpus=1)

    codes, _ = smoke._run_suites(run, engine, "sha256:" + "1" * 64, "x:1", lambda _: None)  # type: ignore[arg-type]

    assert engine.started == 1
    assert len(codes) == 1
