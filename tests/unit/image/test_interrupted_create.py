"""An interrupt that lands while the engine creates a container (Ctrl-C, a CI cancel's SIGTERM,
a closed terminal's SIGHUP) is held until the engine has answered, then delivered: the container
the engine made is removed by this run, at every place xpu-release starts one (the smoke test's
container, a throwaway run's output, the evaluation's bounded runs, the copy of a stage's /out).
Without the hold, the removal raced the engine's own creation and a smoke container outlived a
Ctrl-C on the stack (CI of 2026-12-05)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from xpu_release.cli.app import Terminated, _terminate
from xpu_release.image import bounded, stages
from xpu_release.image.bounded import Limits
from xpu_release.image.engine import Engine
from xpu_release.interrupts import signals_held

from ..fake_volumes import FakeVolumes


@pytest.fixture(autouse=True)
def cli_handlers() -> Iterator[None]:
    """The handlers the command line installs (cli/app.py main), restored after each test."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


class Container:
    def wait(self, timeout: float | None = None) -> dict[str, int]:
        return {"StatusCode": 0}

    def logs(self, **kwargs: Any) -> bytes:
        return b""


class Interrupted:
    """A client whose engine is interrupted by ``sig`` in the middle of creating a container:
    the signal reaches this process before the engine's answer does."""

    def __init__(self, sig: int) -> None:
        self.sig = sig
        self.events: list[str] = []

    @property
    def volumes(self) -> FakeVolumes:
        if not hasattr(self, "_volumes"):
            self._volumes = FakeVolumes()
        return self._volumes

    @property
    def containers(self) -> Interrupted:
        return self

    @property
    def api(self) -> Interrupted:
        return self

    def inspect_image(self, image: str) -> dict[str, str]:
        return {"Architecture": "amd64"}

    def info(self) -> dict[str, str]:
        return {"Architecture": "x86_64"}

    def run(self, image: str, **kwargs: Any) -> Container:
        self._create(kwargs["name"])
        return Container()

    def create_container(self, image: str, **kwargs: Any) -> dict[str, str]:
        self._create(kwargs["name"])
        return {"Id": "1" * 64}

    def _create(self, name: str) -> None:
        os.kill(os.getpid(), self.sig)
        self.events.append(f"created {name}")

    def get_archive(self, name: str, path: str, chunk_size: int) -> tuple[list[bytes], dict[str, Any]]:
        return [b""], {}

    def remove_container(self, name: str, force: bool) -> None:
        self.events.append(f"removed {name}")


SIGNALS = pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                                  ids=["ctrl-c", "sigterm", "sighup"])  # fmt: skip


def made_then_removed(events: list[str]) -> None:
    assert len(events) == 2, events
    assert events[0].startswith("created ")
    assert events[1] == "removed " + events[0].removeprefix("created ")


@SIGNALS
def test_the_smoke_container_is_made_whole_then_removed(sig: int) -> None:
    client = Interrupted(sig)
    with pytest.raises(KeyboardInterrupt), Engine(client).container("sha256:" + "1" * 64, purpose="smoke"):
        pytest.fail("the block ran after an interrupt")
    made_then_removed(client.events)


@SIGNALS
def test_a_throwaway_run_is_made_whole_then_removed(sig: int) -> None:
    client = Interrupted(sig)
    with pytest.raises(KeyboardInterrupt):
        Engine(client).output("img:1", ["dpkg-query", "-W"], purpose="sbom")
    made_then_removed(client.events)


@SIGNALS
def test_a_bounded_run_is_made_whole_then_removed(sig: int) -> None:
    client = Interrupted(sig)
    limits = Limits(cpuset="0", memory_mb=256)
    with pytest.raises(KeyboardInterrupt):
        bounded.Containers(client).run_bounded("img:1", ["xpu-bench"], env={}, purpose="evaluate",
                                               limits=limits, timeout=5)  # fmt: skip
    made_then_removed(client.events)


@SIGNALS
def test_the_copy_of_a_stage_is_made_whole_then_removed(sig: int, tmp_path: Path) -> None:
    client = Interrupted(sig)
    with pytest.raises(KeyboardInterrupt):
        stages.read_out(Engine(client), "stage:1", tmp_path / "out.tar")
    made_then_removed(client.events)


def test_a_held_sigterm_arrives_after_the_block_as_the_command_line_handles_it() -> None:
    ran: list[str] = []

    def block() -> None:
        with signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            ran.append("the rest of the block")

    with pytest.raises(Terminated) as got:
        block()
    assert ran == ["the rest of the block"]
    assert got.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is _terminate  # put back


def test_a_second_signal_while_held_is_delivered_at_once() -> None:
    ran: list[str] = []

    def block() -> None:
        with signals_held():
            os.kill(os.getpid(), signal.SIGINT)
            ran.append("after the first")
            os.kill(os.getpid(), signal.SIGINT)
            ran.append("after the second")

    with pytest.raises(KeyboardInterrupt):
        block()
    assert ran == ["after the first"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_nothing_caught_leaves_the_handlers_as_they_were() -> None:
    with signals_held():
        assert signal.getsignal(signal.SIGTERM) is not _terminate
    assert signal.getsignal(signal.SIGTERM) is _terminate
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_ignored_signal_stays_ignored() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # `nohup`
    with signals_held():
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGHUP)
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
