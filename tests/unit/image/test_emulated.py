"""A container of an image built for another architecture than the engine's (arm64 on an x86-64
runner, under qemu-user's emulation) gets an empty, read-only /sys/devices/system/cpu: PyTorch's
CPU detection reads the host's x86 topology there as an arm64 one and hangs (`import torch` and
a 64x64 product: no answer in 15 minutes here; 15 s over the empty tmpfs). A native container
sees its own machine."""

from __future__ import annotations

from typing import Any

import pytest

from xpu_release.image.engine import EMULATED_MASKS, Engine, masks


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
    ("built_for", "engine_is", "emulated"),
    [
        ("amd64", "x86_64", False),
        ("arm64", "aarch64", False),
        ("arm64", "x86_64", True),
        ("amd64", "aarch64", True),
    ],
)
def test_only_an_emulated_container_gets_an_empty_cpu_topology(
    built_for: str, engine_is: str, emulated: bool
) -> None:
    client = Engined(built_for, engine_is)
    assert masks(client, "img:1") == (EMULATED_MASKS if emulated else {})
    with Engine(client).container("img:1", purpose="smoke"):
        pass
    assert client.started[0]["tmpfs"] == (EMULATED_MASKS if emulated else {})


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
    assert masks(client, "img:1") == {}
