"""The engine refusing to run a container (docker's ``APIError``: a requests ``HTTPError``, so an
``OSError`` with no file name, which the command line would call our bug, exit 70) at every place
xpu-release starts one: the smoke test's container, a throwaway run's output (the lock's and the
SBOM's listings) and the evaluation's bounded runs. Each is said as the stage failing, with the
engine's words escaped, and no container is left behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from docker.errors import APIError

from xpu_release.errors import BuildFailed, SmokeTestFailed
from xpu_release.image import bounded
from xpu_release.image.bounded import Limits
from xpu_release.image.engine import Engine

from ..fake_volumes import FakeVolumes

SAID = 'OCI runtime create failed: exec: "sleep\x1b[2J": executable file not found in $PATH'


class Refusing:
    """A client whose engine answers every container run with a 400."""

    def __init__(self) -> None:
        self.removed: list[str] = []
        self.created: list[str] = []

    @property
    def volumes(self) -> FakeVolumes:
        if not hasattr(self, "_volumes"):
            self._volumes = FakeVolumes()
        return self._volumes

    @property
    def containers(self) -> Refusing:
        return self

    @property
    def api(self) -> Refusing:
        return self

    def inspect_image(self, image: str) -> dict[str, str]:
        return {"Architecture": "amd64"}

    def info(self) -> dict[str, str]:
        return {"Architecture": "x86_64"}

    def run(self, image: str, **kwargs: Any) -> Any:
        self.created.append(kwargs.get("name", ""))
        status = "400 Client Error: Bad Request"
        raise APIError(status, explanation=SAID)

    def remove_container(self, name: str, force: bool) -> None:
        self.removed.append(name)


def printable(message: str) -> bool:
    return all(ch.isprintable() for ch in message)


def test_a_smoke_container_the_engine_will_not_start_fails_the_smoke_test() -> None:
    client = Refusing()
    with (
        pytest.raises(SmokeTestFailed) as failed,
        Engine(client).container("sha256:" + "1" * 64, purpose="smoke"),
    ):
        pytest.fail("no container was started")
    assert failed.value.exit_code == 6
    assert "would not start a smoke container" in failed.value.message
    assert "executable file not found" in failed.value.message
    assert printable(failed.value.message), failed.value.message
    assert client.removed == client.created  # nothing left behind


def test_a_throwaway_run_the_engine_refuses_is_the_build_failing() -> None:
    with pytest.raises(BuildFailed) as failed:
        Engine(Refusing()).output("img:1", ["python3", "-c", "print(1)"], purpose="lock")
    assert "would not run python3 -c in img:1" in failed.value.message
    assert printable(failed.value.message), failed.value.message


def test_a_bounded_run_the_engine_refuses_says_what_it_answered() -> None:
    client = Refusing()
    limits = Limits(cpuset="0", memory_mb=256)
    got = bounded.Containers(client).run_bounded("img:1", ["xpu-bench"], env={}, purpose="evaluate",
                                                 limits=limits, timeout=5)  # fmt: skip
    assert got.refused is not None
    assert "executable file not found" in got.refused
    assert client.removed == client.created


class DiskFull:
    """A client whose tar of the build context meets a full disk, as Docker's client says it."""

    @property
    def api(self) -> DiskFull:
        return self

    def build(self, path: str, **kwargs: Any) -> Any:
        try:
            raise OSError(28, "No space left on device")
        except OSError:
            msg = f"Can not read file in context: {path}/artifacts/payload/payload.tar.gz"
            raise OSError(msg)  # noqa: B904 (docker-py's own words, its cause one exception down)


def test_a_context_that_cannot_be_tarred_is_the_build_failing_with_its_cause(tmp_path: Path) -> None:
    with pytest.raises(BuildFailed) as failed:
        Engine(DiskFull()).build(context=tmp_path, tag="img:1", buildargs={}, labels={}, on_line=print)
    assert failed.value.exit_code == 5
    assert "No space left on device" in failed.value.message
    assert "TMPDIR" in failed.value.message
