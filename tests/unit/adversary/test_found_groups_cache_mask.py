"""Found by review of the change since 5d779fc: the empty CPU topology an emulated container gets
(image/engine.py ``masks``), and the compile cache the evaluation's served arms of one image share
(image/served.py). Held against engine-free fakes in the style of tests/unit/image/test_emulated.py,
test_served.py and test_interrupted_create.py. Each test names the defect and the rule it breaks;
each fails on the code as reviewed."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from xpu_release.cli.app import _terminate
from xpu_release.image import bounded
from xpu_release.image.bounded import Limits, Sight
from xpu_release.image.engine import EMULATED_MASKS
from xpu_release.image.served import Served

from ..fake_volumes import FakeVolume, FakeVolumes

ROOT = Path(__file__).resolve().parents[3]
LIMITS = Limits(cpuset="0-1", memory_mb=2048)


class Container:
    id = "c1"
    status = "running"

    def wait(self, timeout: float | None = None) -> dict[str, int]:
        return {"StatusCode": 0}

    def logs(self, **kwargs: Any) -> bytes:
        return b'{"workload": "xpu-bench", "tokens_per_second": 5.0}\n' if kwargs.get("stdout") else b""


class Engine:
    """A docker client as the smoke test, a throwaway run and the evaluation ask it: an image's
    architecture (``inspect_image``), the engine's (``info``), the containers it starts (their
    keyword arguments, recorded) and the volumes it makes."""

    def __init__(self, built_for: str, engine_is: str, volumes: FakeVolumes | None = None) -> None:
        self.built_for, self.engine_is = built_for, engine_is
        self.started: list[dict[str, Any]] = []
        self.volumes = volumes or FakeVolumes()

    @property
    def api(self) -> Engine:
        return self

    @property
    def containers(self) -> Engine:
        return self

    def inspect_image(self, image: str) -> dict[str, str]:
        return {"Architecture": self.built_for, "Os": "linux"}

    def info(self) -> dict[str, Any]:
        return {"Architecture": self.engine_is, "NCPU": 2}

    def run(self, image: str, **kwargs: Any) -> Container:
        self.started.append(kwargs)
        return Container()

    def remove_container(self, name: str, force: bool) -> None:
        pass


# --- the emulated container's empty CPU topology ---------------------------------------------------


@pytest.mark.parametrize(("built_for", "engine_is"), [("arm64", "arm64"), ("amd64", "amd64")],
                         ids=["arm64-on-arm64", "amd64-on-amd64"])  # fmt: skip
def test_a_native_image_on_an_engine_that_names_its_architecture_as_go_does_is_not_masked(
    built_for: str, engine_is: str
) -> None:
    """Defect: ``masks`` maps only the image's architecture to a machine name (arm64 → aarch64,
    amd64 → x86_64) and compares it with the engine's ``info()["Architecture"]`` as given. An
    engine that answers the Docker API with Go's name (Podman's compat ``/info`` sets
    ``Architecture: runtime.GOARCH``: "amd64", "arm64") is then never equal: every native
    container gets the empty read-only tmpfs over /sys/devices/system/cpu. Found by feeding
    ``masks`` the two spellings of the same machine the brief named.

    Rule broken: "a native container sees its own machine" (engine.py ``masks``, the commit
    message, test_emulated.py); only an image of *another* architecture than the engine's is
    masked. A masked native container loses its CPU topology (what a smoke check or PyTorch's
    thread count reads there)."""
    client = Engine(built_for, engine_is)

    assert Sight(client).masks("sha256:" + "1" * 64) == {}


@pytest.mark.parametrize("runner", ["bounded", "served"])
def test_an_emulated_images_evaluation_container_gets_the_empty_cpu_topology_too(runner: str) -> None:
    """Defect: the mask reaches the smoke test's container and ``Engine.output`` only; the
    evaluation's containers (``bounded.start_container``, used by ``Containers.run_bounded`` and
    by ``Served`` for each arm) start an arm64 image on an x86-64 engine with the host's
    /sys/devices/system/cpu. Found by grepping ``containers.run``: bounded.py:122 is the third
    place that starts a container of an image, and it passes no ``tmpfs``. The evaluation
    measures the first platform's image (pipeline ``_platforms``, ``evaluate``'s
    ``spec.platforms[0]``), which is arm64 for a manifest with ``platforms: [linux/arm64]`` (or
    one listing it first).

    Rule broken: docs/using/platforms.md names the fix and where it belongs: "an emulated
    platform's containers (the smoke test, the evaluation) with an empty tmpfs over
    /sys/devices/system/cpu"; without it PyTorch's CPU detection hangs or crashes under
    qemu-user (`import torch` and a 64x64 product: no answer in 15 minutes), so the evaluation
    of such an image runs out its whole budget instead of measuring."""
    client = Engine("arm64", "x86_64")
    if runner == "bounded":
        image = "sha256:" + "a" * 64
        bounded.Containers(client).run_bounded(image, ["xpu-bench"], env={}, purpose="evaluate",
                                               limits=LIMITS, timeout=5)  # fmt: skip
    else:
        with Served(client) as served:
            served.prepare("sha256:" + "a" * 64, ["xpu-bench"], env={}, purpose="evaluate", limits=LIMITS)

    [started] = client.started
    assert started.get("tmpfs") == EMULATED_MASKS


# --- the shared compile cache's volume -------------------------------------------------------------


@pytest.fixture
def cli_handlers() -> Iterator[None]:
    """The handlers the command line installs (cli/app.py main), restored after the test."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


class InterruptedVolumes(FakeVolumes):
    """The engine makes the volume; the interrupt (Ctrl-C, a CI cancel's SIGTERM) reaches this
    process before the engine's answer has been read."""

    def __init__(self, sig: int) -> None:
        super().__init__()
        self.sig = sig

    def create(self, name: str, **kwargs: Any) -> FakeVolume:
        made = super().create(name, **kwargs)  # the engine has it now
        os.kill(os.getpid(), self.sig)
        return made


@pytest.mark.usefixtures("cli_handlers")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_compile_cache_volume_made_as_an_interrupt_lands_is_removed(sig: int) -> None:
    """Defect: ``Served._volume`` asks the engine for the volume with interrupts not held, and
    registers its removal only once ``volumes.create`` has returned. An interrupt that lands
    while the engine makes it (the request sent, the answer not read) is raised inside
    ``create``: the engine holds the volume, and nothing will remove it. Found by reading
    ``_volume`` beside ``bounded.throwaway``, which wraps every container's create in
    ``signals_held`` for exactly this race, and replaying test_interrupted_create.py's fake
    for the volume.

    Rule broken: "The volumes are removed after the stage's containers" and the stage's
    objects are "always removed when the stage ends, also on Ctrl-C" (docs/using/evaluation.md;
    interrupts.py: a create runs whole, then the interrupt is delivered and the ``finally``
    removes what was made). Here a Ctrl-C or a CI cancel at the stage's start leaves a labelled
    tmpfs volume (up to 1 GB of RAM once mounted) on the runner's engine for good."""
    volumes = InterruptedVolumes(sig)
    client = Engine("amd64", "x86_64", volumes)

    with pytest.raises(KeyboardInterrupt), Served(client) as served:
        served.prepare("sha256:" + "1" * 64, ["xpu-bench"], env={}, purpose="evaluate", limits=LIMITS)

    assert list(volumes.made), "the engine was asked for no volume"
    assert sorted(volumes.removed) == sorted(volumes.made), "a compile cache volume left on the engine"


def test_the_evaluation_page_says_how_served_arms_settle_and_that_one_image_shares_a_cache() -> None:
    """Defect: the change made the servers of one image settle one after another and share a
    tmpfs compile cache (``TORCHINDUCTOR_CACHE_DIR``), but docs/using/evaluation.md, the page
    the record's method and the notes point readers to, still says the opposite: "the first
    round every server is asked once, unrecorded, all at once (a compiled arm compiles at its
    first step, and the compiles overlap as the starts did)" and "Each arm compiles for itself".
    Found by grepping the docs for the old settle and cache wording after reading served.py's
    new docstring (the commit touched no page under docs/using).

    Rule broken: the documentation says what the stage does; a reader comparing the warm-up
    times of two releases, or auditing what one arm's container could see of another's (the
    shared volume), is told each arm compiles alone and all servers settle at once."""
    page = (ROOT / "docs" / "using" / "evaluation.md").read_text(encoding="utf-8")
    flat = " ".join(page.split())

    said = (
        "unrecorded, all at once (a compiled arm compiles at its first step, and the compiles overlap "
        "as the starts did)",
        "Each arm compiles for itself",
    )
    stale = [s for s in said if s in flat]
    assert stale == []
    assert "TORCHINDUCTOR_CACHE_DIR" in flat  # where the shared cache is, as a variant would name its own
