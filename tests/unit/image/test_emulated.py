"""A container of an image built for another architecture than the engine's (arm64 on an x86-64
runner, under qemu-user's emulation) gets an empty, read-only /sys/devices/system/cpu: PyTorch's
CPU detection reads the host's x86 topology there as an arm64 one and hangs (`import torch` and
a 64x64 product: no answer in 15 minutes here; 15 s over the empty tmpfs). A native container
sees its own machine."""

from __future__ import annotations

from typing import Any

import pytest

from xpu_release.image.bounded import Sight, emulated
from xpu_release.image.engine import EMULATED_MASKS, Engine


class Engined:
    """The engine's client as a smoke test's container asks it: an image's architecture, the
    engine's, and the container it starts (recorded)."""

    def __init__(self, built_for: str, engine_is: str) -> None:
        self.built_for, self.engine_is = built_for, engine_is
        self.started: list[dict[str, Any]] = []

    @property
    def api(self) -> Engined:
        return self

    @property
    def containers(self) -> Engined:
        return self

    def inspect_image(self, image: str) -> dict[str, str]:
        return {"Architecture": self.built_for}

    def info(self) -> dict[str, str]:
        return {"Architecture": self.engine_is}

    def run(self, image: str, **kwargs: Any) -> None:
        self.started.append(kwargs)

    def remove_container(self, name: str, force: bool) -> None:
        pass


@pytest.mark.parametrize(
    ("built_for", "engine_is", "is_emulated"),
    [
        ("amd64", "x86_64", False),
        ("arm64", "aarch64", False),
        ("arm64", "x86_64", True),
        ("amd64", "aarch64", True),
    ],
)
def test_only_an_emulated_container_gets_an_empty_cpu_topology(
    built_for: str, engine_is: str, is_emulated: bool
) -> None:
    client = Engined(built_for, engine_is)
    assert Sight(client).masks("img:1") == (EMULATED_MASKS if is_emulated else {})
    with Engine(client).container("img:1", purpose="smoke"):
        pass
    assert client.started[0]["tmpfs"] == (EMULATED_MASKS if is_emulated else {})


def test_the_mask_is_an_empty_read_only_tmpfs_over_the_cpu_topology_alone() -> None:
    # /proc/cpuinfo, /sys/fs/cgroup and the rest of /sys stay as the engine gives them.
    assert EMULATED_MASKS == {"/sys/devices/system/cpu": "ro"}


def test_an_engine_that_will_not_say_its_architecture_is_taken_as_native() -> None:
    # A socket proxy that refuses /info: the container starts unmasked, never refused for it.
    from docker.errors import APIError

    client = Engined("arm64", "x86_64")

    def refused() -> dict[str, str]:
        said = "403 Forbidden"
        raise APIError(said)

    client.info = refused  # type: ignore[method-assign]
    assert Sight(client).masks("img:1") == {}


def test_the_engine_is_asked_its_architecture_once_however_many_containers_start() -> None:
    # The reread of session 13: every container asked the engine's /info again.
    client = Engined("arm64", "x86_64")
    asked: list[int] = []
    said = client.info

    def counted() -> dict[str, str]:
        asked.append(1)
        return said()

    client.info = counted  # type: ignore[method-assign]
    engine = Engine(client)
    for _ in range(3):
        with engine.container("img:1", purpose="smoke"):
            pass
    assert len(asked) == 1
    assert [c["tmpfs"] for c in client.started] == [EMULATED_MASKS] * 3


@pytest.mark.parametrize("unknown", [("", "x86_64"), ("arm64", "")])
def test_an_architecture_either_side_does_not_name_is_taken_as_native(unknown: tuple[str, str]) -> None:
    assert emulated(*unknown) == {}
