"""A bounded run in a throwaway container: what the evaluation's workload runs in, through the
engine's client. Every run gets the same limits (a CPU set and memory, no swap, no network),
a timeout, and a log the engine keeps small (its output is outside data); the container is
removed afterwards, also on Ctrl-C, unless XPU_RELEASE_KEEP_CONTAINERS=1.

Two ways to run an arm, one answer (``Finished``) each run:

- ``Containers``: each run in a container of its own (any workload: the manifest's command);
- ``served.Served``: a workload that serves (``workload.serves``: the carried xpu-bench) keeps
  one container an arm for the whole evaluation, started with ``--serve``, and each run is an
  ``--ask`` in it (``docker exec``): the interpreter is started, PyTorch imported and the model
  compiled once an arm, not once a round.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

from ..guard.limits import MAX_WORKLOAD_LOG_BYTES
from ..secrets import redact

CONTAINER_LABEL = "io.xpu-release.container"  # every throwaway container carries it (engine.py)

T = TypeVar("T")
LOG_LIMIT = f"{MAX_WORKLOAD_LOG_BYTES >> 10}k"  # what the engine keeps of a bounded run's log


# An image of another architecture than the engine's runs under qemu-user's emulation, and sees
# the host's /sys/devices/system/cpu: the x86 host's topology, which PyTorch's CPU detection
# (cpuinfo, oneDNN's xbyak_aarch64) reads as an arm64 one and hangs on or crashes at (`import
# torch` and a 64x64 product: no answer in 15 minutes; a segfault in a chroot). Over an empty
# tmpfs the detection says it found nothing and carries on: the same in 15 s (2026-12-07).
EMULATED_MASKS = {"/sys/devices/system/cpu": "ro"}


def emulated(built_for: str, engine_is: str) -> dict[str, str]:
    """The tmpfs mounts a container of an image built for ``built_for`` gets on an engine of
    ``engine_is``: ``EMULATED_MASKS`` when they differ (each named as Go or as ``uname -m`` names
    it: Docker says x86_64, Podman amd64; ``manifest/platforms`` knows both), else none: a
    native container sees its own machine. Either unknown (""): taken as native, and an
    emulated run then shows its hang as a timeout."""
    from ..manifest.platforms import KNOWN

    machines = {p.architecture: p.machine for p in KNOWN.values()}
    native = machines.get(built_for, built_for) == machines.get(engine_is, engine_is)
    return {} if native or not (built_for and engine_is) else dict(EMULATED_MASKS)


class Sight:
    """What the engine behind ``client`` says of its machine, asked once (``/info``: its
    architecture and CPUs; an engine that will not say, a socket proxy that refuses ``/info``,
    says "" and one CPU) and of an image's config (asked as a container of it starts; a refusal
    says nothing). Its machine may not be this one."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._info: dict[str, Any] | None = None

    def _said(self) -> dict[str, Any]:
        """``/info``'s answer, kept once given or refused (4xx: a proxy that will not say); an
        error of the engine's own (5xx, none) is not kept: the next container asks again."""
        from docker.errors import APIError

        if self._info is None:
            try:
                self._info = dict(self.client.info() or {})
            except APIError as exc:
                if 400 <= (getattr(exc, "status_code", None) or 500) < 500:
                    self._info = {}
                return self._info or {}
        return self._info

    @property
    def machine(self) -> str:
        return str(self._said().get("Architecture") or "")

    @property
    def cpus(self) -> int:
        return int(self._said().get("NCPU") or 1)

    def config(self, image: str) -> dict[str, Any]:
        """``image``'s inspection (its ``Architecture``, its ``Config``); {}: refused."""
        from docker.errors import APIError

        try:
            return dict(self.client.api.inspect_image(image) or {})
        except APIError:
            return {}

    def masks(self, image: str, config: dict[str, Any] | None = None) -> dict[str, str]:
        """What a container of ``image`` (of its inspection ``config``, when known) mounts."""
        seen = self.config(image) if config is None else config
        return emulated(str(seen.get("Architecture") or ""), self.machine)


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What every container of an evaluation gets alike: a CPU set (``0-1``) and memory."""

    cpuset: str
    memory_mb: int


@dataclass(frozen=True, kw_only=True)
class Launch:
    """One throwaway container: what runs in it (image, command, environment), its purpose (its
    name and label say it), its limits, and the volumes it mounts (volume name, path inside)."""

    image: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    purpose: str
    limits: Limits
    volumes: tuple[tuple[str, str], ...] = ()
    masks: tuple[tuple[str, str], ...] = ()  # tmpfs mounts: an emulated image's (``Sight.masks``)
    name: str = ""  # "": made from the purpose (``container_name``)

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", container_name(self.purpose))


@dataclass(frozen=True, kw_only=True)
class Finished:
    """How a bounded run ended: its exit status (None: still running at its timeout, then
    killed), the last lines of its stdout (bytes, as the workload wrote them) and of its stderr
    (redacted); ``refused``: what the engine said when it would not run it at all (the command
    is not in the image, a CPU set it cannot give), outside text to show escaped."""

    exit_code: int | None
    stdout: bytes
    stderr: str
    refused: str | None = None


@contextmanager
def throwaway(client: Any, name: str, create: Callable[[], T], *, keep: bool = False) -> Iterator[T]:
    """The container ``name`` that ``create()`` makes (what it returns), removed by that name when
    the block ends, however it ends (``keep``: left, for debugging). Every container xpu-release
    makes is made here: the create runs with interrupts held (``interrupts.py``), so one that
    lands meanwhile is delivered after the engine has answered, and the removal finds what it
    made (a removal racing the engine's own create left a container behind)."""
    from docker.errors import NotFound

    from ..interrupts import signals_held

    try:
        with signals_held():
            made = create()
        yield made
    finally:
        if not keep:
            with suppress(NotFound):
                client.api.remove_container(name, force=True)


def run(client: Any, launch: Launch, timeout: float) -> Finished:
    """Run ``launch`` in a throwaway container for at most ``timeout`` seconds."""
    import requests
    from docker.errors import APIError

    from ..settings import current

    try:
        with throwaway(client, launch.name, lambda: start_container(client, launch),
                       keep=current().keep_containers) as container:  # fmt: skip
            exit_code: int | None
            try:
                exit_code = int(container.wait(timeout=max(timeout, 1.0))["StatusCode"])
            except APIError:  # the engine's answer (an HTTP error, so a RequestException too): below
                raise
            except requests.exceptions.RequestException:  # the read timed out: still running
                exit_code = None
            return ended_with(container, exit_code)
    except APIError as exc:
        # The engine would not create, start or follow the container (docker's APIError is an
        # OSError with no file name: left alone it is exit 70). Said as what the engine answered.
        return Finished(exit_code=None, stdout=b"", stderr="", refused=engine_said(exc))


def start_container(client: Any, launch: Launch) -> Any:
    """The container ``launch`` names, started (detached)."""
    from docker.types import LogConfig

    limits = launch.limits
    return client.containers.run(
        launch.image, command=list(launch.argv), name=launch.name, detach=True, entrypoint=[],
        environment=dict(launch.env), labels={CONTAINER_LABEL: launch.purpose}, network_mode="none",
        tmpfs=dict(launch.masks),
        cpuset_cpus=limits.cpuset, mem_limit=f"{limits.memory_mb}m", memswap_limit=f"{limits.memory_mb}m",
        log_config=LogConfig(type="json-file", config={"max-size": LOG_LIMIT, "max-file": "1"}),
        **({"volumes": {volume: {"bind": path, "mode": "rw"} for volume, path in launch.volumes}}
           if launch.volumes else {}),
    )  # fmt: skip


def ended_with(container: Any, exit_code: int | None) -> Finished:
    """How ``container``'s main process ended (``exit_code``), with the last lines it wrote."""
    stdout = container.logs(stdout=True, stderr=False, tail=50)
    stderr = container.logs(stdout=False, stderr=True, tail=20)
    return Finished(exit_code=exit_code, stdout=stdout, stderr=redact(stderr.decode(errors="replace")))


def engine_said(exc: Exception) -> str:
    """What the engine answered in refusing a request (docker's ``APIError``), redacted, one
    line: outside text, for a message that shows it escaped."""
    said = getattr(exc, "explanation", None) or str(exc)
    said = " ".join(redact(said.decode(errors="replace") if isinstance(said, bytes) else str(said)).split())
    status = getattr(exc, "status_code", None)
    return f"{said} (HTTP {status})" if status else said


class Containers:
    """The engine as the evaluation asks it (``experiment.Runner``): bounded runs, and how many
    CPUs a CPU set may name."""

    def __init__(self, client: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.sight = Sight(client)
        self.now = clock  # the evaluation's clock (a test's fake engine has its own)

    def prepare(self, image: str, argv: list[str], *, env: dict[str, str], purpose: str,
                limits: Limits, arm: str = "") -> None:  # fmt: skip
        """Nothing: each run starts a container of its own."""

    def run_bounded(self, image: str, argv: list[str], *, env: dict[str, str], purpose: str,
                    limits: Limits, timeout: float, arm: str = "") -> Finished:  # fmt: skip
        launch = Launch(image=image, argv=tuple(argv), env=tuple(env.items()), purpose=purpose, limits=limits,
                        masks=tuple(self.sight.masks(image).items()))  # fmt: skip
        return run(self.client, launch, timeout)

    def cpu_count(self) -> int:
        return self.sight.cpus


def container_name(purpose: str) -> str:
    return f"xpu-release-{purpose}-{uuid.uuid4().hex[:12]}"
