"""A release works out what it knows once and hands it down (issue 42): the Dockerfile rendered
once, the lock parsed once, the inputs hashed once, the registries file read once; one SBOM, made
in one throwaway container, is what the gate scans and what publish attaches; one endpoint pool
authenticates once per endpoint and scope. Counted on a whole release with a fake engine and
fake registries (``fake_release``)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from xpu_release.image import inputs, lockfile, render
from xpu_release.image.engine import Engine
from xpu_release.manifest import registries

from ..conftest import forget_the_stack
from ..helpers import run
from .fake_release import REF, World, copy_of_repository, world

WORK = Counter[str]()  # what the release worked out, and how often


def counted(name: str, work: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        WORK[name] += 1
        return work(*args, **kwargs)

    return wrapper


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A whole release of ``REF``, from `validate` to `record`, gate included (one for the
    module: the tests read what it counted)."""
    tmp_path = tmp_path_factory.mktemp("release")
    with (
        pytest.MonkeyPatch.context() as monkeypatch,
        world(copy_of_repository(tmp_path / "repo"), tmp_path) as w,
    ):
        forget_the_stack(monkeypatch)
        WORK.clear()
        monkeypatch.setattr(render, "render", counted("render", render.render))
        monkeypatch.setattr(inputs, "inputs_sha256", counted("inputs hashed", inputs.inputs_sha256))
        monkeypatch.setattr(registries, "_checked", counted("registries file read", registries._checked))
        parse = lockfile.Lock.parse.__func__  # type: ignore[attr-defined]
        monkeypatch.setattr(lockfile.Lock, "parse", classmethod(counted("lock parsed", parse)))
        monkeypatch.setattr(Engine, "connect", classmethod(lambda cls: w.engine))
        monkeypatch.setenv("XPU_RELEASE_CACHE", str(tmp_path / "cache"))
        login = ("--username", "u", "--password-stdin")
        result = run(w.root, "--registries", str(w.override), "release", REF, "--json",
                     "--advisories", str(w.advisories), *login, input="the-password\n")  # fmt: skip
        assert result.exit_code == 0, result.stderr
        w.summary = json.loads(result.stdout)
        yield w


def test_one_sbom_is_made_per_release_for_the_gate_and_publish_both(released: World) -> None:
    assert released.engine.calls["container:sbom"] == 1
    stages = {s["name"]: s["status"] for s in released.summary["stages"]}
    assert stages["scan"] == "done"
    assert stages["publish"] == "done"


def test_publish_is_handed_the_image_the_build_stage_found(released: World) -> None:
    # Both lookups are the build stage's (build avoidance's, and the build's up-to-date check);
    # publish no longer asks the engine what the build returned.
    assert released.engine.calls["image"] == 2


def test_what_a_release_knows_is_worked_out_once(released: World) -> None:
    assert WORK == {
        "render": 1,
        "lock parsed": 1,
        "inputs hashed": 1,
        "registries file read": 2,  # registries.yaml and the override, once each
    }


def test_each_endpoint_authenticates_once_per_scope_in_a_release(released: World) -> None:
    # One client per endpoint for the whole run (build avoidance, publish, its copies, verify and
    # status); a second client of the run starts with the first one's tokens.
    scope = "repository:egslingjun/pytorch-cpu-sdk"
    for name, registry in released.registries.items():
        assert sorted(registry.token_scopes) == [f"{scope}:pull", f"{scope}:pull,push"], name
