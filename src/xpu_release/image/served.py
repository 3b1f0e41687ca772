"""The evaluation's served arms (``Served``): for a workload that serves (``workload.serves``:
the carried xpu-bench), one container an arm for the whole stage, started with ``--serve``, each
run an ``--ask`` in it through ``docker exec``, its answer read as outside data (``_Answer``:
bounded in size, and by our clock in a thread of its own). Built on ``bounded``'s containers:
the same limits, labels and removal.

The arms of one image share PyTorch's compile cache for the stage (``CACHE_DIR``, a tmpfs volume
removed with the stage, named by ``TORCHINDUCTOR_CACHE_DIR`` unless the variant or the image's
config names its own): what one arm compiles (``+CompilerOpt``) another arm of the same image
finds (``+CompilerOpt+CkptOpt``: 38 s to start alone here, 22 s after the other), so the servers
of one image settle one after another (two compiling at once each compile it). Never an arm of
another image: its compiler may differ, and its kernels would be measured as ours. The steps
measured run the same kernels either way."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import ExitStack, suppress
from typing import Any

from ..guard.limits import MAX_WORKLOAD_LOG_BYTES
from ..secrets import redact
from .bounded import (
    CONTAINER_LABEL,
    Containers,
    Finished,
    Launch,
    Limits,
    container_name,
    ended_with,
    engine_said,
    start_container,
    throwaway,
)
from .workloads.xpu_bench import ASK_TIMED_OUT  # --ask's exit status: the workload's own constant

CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"  # where PyTorch's inductor keeps what it compiles
CACHE_DIR = "/tmp/xpu-bench-cache"  # the image's shared compile cache, inside each of its arms
CACHE_VOLUME = {"type": "tmpfs", "device": "tmpfs", "o": "size=1g,mode=1777"}  # any user writes it

ASK_GRACE = 1.0  # seconds past an ask's own timeout before its server is stopped
SETTLING = 8  # servers asked at once when they settle (each holds a connection to the engine)


class _Answer:
    """What one ask wrote, read in a thread of its own (so that a read the image never ends is
    bounded by our clock), and no more than ``MAX_WORKLOAD_LOG_BYTES`` of it."""

    def __init__(self) -> None:
        self.out, self.err = bytearray(), bytearray()
        self.over = False
        self.failed: Exception | None = None

    def read(self, api: Any, exec_id: str) -> None:
        try:
            for out, err in api.exec_start(exec_id, stream=True, demux=True):
                self.out += out or b""
                self.err += err or b""
                if len(self.out) + len(self.err) > MAX_WORKLOAD_LOG_BYTES:
                    self.over = True
                    return
        except Exception as exc:  # handed to the asker, which says the engine's and raises the rest
            self.failed = exc


class Served(Containers):
    """The engine as the evaluation asks it for a workload that serves: ``prepare`` (or the first
    run) of an arm (``arm`` names it; an image, a command, an environment, the limits) starts its
    container with ``--serve``, all at once, so that their starts overlap. At the first run every
    server started answers once, unrecorded (its import and compile done), and is paused; from
    then on each run unpauses the one server it asks (``--ask SECONDS``, bounded by the run's
    timeout) and pauses it again, so that only the server asked runs: another arm's server, even a
    hostile image's, cannot take the CPU from a measurement. A server that ended is said as a run
    that failed (its exit status, its last lines). A context manager: every container it started
    is removed when the block ends, however it ends."""

    def __init__(self, client: Any, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(client, clock)
        self._open: dict[tuple[Any, ...], Any] = {}
        self._stack = ExitStack()
        self._caches = _Caches(client, self._stack)
        self._configs: dict[str, dict[str, Any]] = {}  # image → its inspection, asked once a stage
        self._settled = False
        self._paused: set[str] = set()
        self._stopped: set[str] = set()  # servers killed for an ask that ignored its timeout

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *_: object) -> None:
        self._open.clear()
        self._stack.close()

    def prepare(self, image: str, argv: list[str], *, env: dict[str, str], purpose: str,
                limits: Limits, arm: str = "") -> None:  # fmt: skip
        """Start the arm's server now (it imports and compiles while the others start): an
        engine's refusal is kept for the arm's first run to say."""
        self._server(image, argv, env=env, purpose=purpose, limits=limits, arm=arm)

    def run_bounded(self, image: str, argv: list[str], *, env: dict[str, str], purpose: str,
                    limits: Limits, timeout: float, arm: str = "") -> Finished:  # fmt: skip
        server = self._server(image, argv, env=env, purpose=purpose, limits=limits, arm=arm)
        if isinstance(server, Finished):
            return server
        if not self._settled:
            began = time.monotonic()
            self._settle(argv[0], timeout)
            timeout -= time.monotonic() - began
        if timeout <= 0 or server.id in self._stopped:  # its time went on settling; or we stopped it
            return Finished(exit_code=None, stdout=b"", stderr="")
        self._unpause(server)
        try:
            return self._ask(server, argv[0], timeout)
        finally:
            self._pause(server)

    def _server(self, image: str, argv: list[str], *, env: dict[str, str], purpose: str,
                limits: Limits, arm: str) -> Any:  # fmt: skip
        """The arm's container, started at the first call; or the engine's refusal (``Finished``)."""
        from docker.errors import APIError

        from ..settings import current

        key = (arm, image, tuple(argv), tuple(sorted(env.items())), limits)
        if key not in self._open:
            if image not in self._configs:
                self._configs[image] = self.sight.config(image)
            config = self._configs[image]
            shared = None if CACHE_ENV in env else self._caches.volume(image, purpose, config)
            launch = Launch(image=image, argv=(*argv, "--serve"), purpose=purpose, limits=limits,
                            env=(*env.items(), *([(CACHE_ENV, CACHE_DIR)] if shared else [])),
                            volumes=((shared, CACHE_DIR),) if shared else (),
                            masks=tuple(self.sight.masks(image, config).items()))  # fmt: skip
            made = throwaway(self.client, launch.name, lambda: start_container(self.client, launch),
                             keep=current().keep_containers)  # fmt: skip
            try:
                self._open[key] = self._stack.enter_context(made)
            except APIError as exc:
                self._open[key] = Finished(exit_code=None, stdout=b"", stderr="", refused=engine_said(exc))
        return self._open[key]

    def _settle(self, program: str, timeout: float) -> None:
        """Every server started answers once, unrecorded, within ``timeout``, then is paused. A
        workload may do its slow part at its first ask (``torch.compile`` compiles at the first
        step): the images' servers are asked at once (at most ``SETTLING`` images at a time), so
        that those overlap as the starts did, and the servers of one image one after another, so
        that what one compiles the next finds in their shared cache (two compiling at once would
        each compile it). What an answer said is not kept: a server that cannot answer says so
        again when its arm is asked."""
        self._settled = True
        images = _by_image(self._open)
        deadline = time.monotonic() + timeout
        slots, failed = threading.BoundedSemaphore(SETTLING), list[BaseException]()

        def first(servers: list[Any]) -> None:
            with slots:
                for server in servers:
                    if failed or (left := deadline - time.monotonic()) <= 0:
                        return
                    try:
                        self._ask(server, program, left)
                    except Exception as exc:  # handed to the stage's thread, raised there as from a run
                        failed.append(exc)

        # Daemon threads, waited on in short joins: Ctrl-C or an error ends the wait at once
        # (the stage's containers are then removed, which ends the asks still open).
        asks = [threading.Thread(target=first, args=(servers,), daemon=True) for servers in images.values()]
        for ask in asks:
            ask.start()
        for ask in asks:
            while ask.is_alive() and not failed:
                ask.join(0.05)
            if failed:
                raise failed[0]
        for servers in images.values():
            for server in servers:
                self._pause(server)

    def _pause(self, container: Any) -> None:
        from docker.errors import APIError

        with suppress(APIError):  # a server that ended cannot be paused: its next ask says how it ended
            container.pause()
            self._paused.add(container.id)

    def _unpause(self, container: Any) -> None:
        from docker.errors import APIError

        if container.id in self._paused:
            self._paused.discard(container.id)
            with suppress(APIError):
                container.unpause()

    def _ask(self, container: Any, program: str, timeout: float) -> Finished:
        """One ask, read as outside data: at most ``MAX_WORKLOAD_LOG_BYTES`` of its output, and
        for at most its own timeout and ``ASK_GRACE`` (an image whose ``--ask`` ignores its
        timeout has its server stopped: the run is one still going at its deadline)."""
        import requests
        from docker.errors import APIError

        api = self.client.api
        began = time.monotonic()
        try:
            made = api.exec_create(container.id, [program, "--ask", f"{max(timeout, 0.1):.1f}"])
        except APIError as exc:  # no exec in a container that stopped: its server ended
            return self._ended(container) or Finished(exit_code=None, stdout=b"", stderr="",
                                                      refused=engine_said(exc))  # fmt: skip
        got = _Answer()
        reader = threading.Thread(target=got.read, args=(api, made["Id"]), daemon=True)
        reader.start()
        reader.join(max(timeout, 0.1) + ASK_GRACE)
        if reader.is_alive():
            with suppress(APIError):
                container.kill()
            self._stopped.add(container.id)
            reader.join(ASK_GRACE)
            return Finished(exit_code=None, stdout=b"", stderr="")
        if isinstance(got.failed, APIError | requests.exceptions.RequestException):  # the engine's answer
            return self._ended(container) or Finished(exit_code=None, stdout=b"", stderr="",
                                                      refused=engine_said(got.failed))  # fmt: skip
        if got.failed is not None:
            raise got.failed
        said = redact(bytes(got.err).decode(errors="replace"))
        if got.over:
            said = f"the workload wrote more than {MAX_WORKLOAD_LOG_BYTES} bytes in answer to one ask"
            return Finished(exit_code=1, stdout=b"", stderr=said)
        code = api.exec_inspect(made["Id"]).get("ExitCode")
        if code == 0:
            return Finished(exit_code=0, stdout=bytes(got.out), stderr=said)
        ended = self._ended(container)
        if ended is not None:
            return ended
        if code == ASK_TIMED_OUT and time.monotonic() - began >= 0.9 * timeout:
            return Finished(exit_code=None, stdout=b"", stderr="")  # no answer in its time: still going
        return Finished(
            exit_code=int(code) if isinstance(code, int) else 1, stdout=bytes(got.out), stderr=said
        )

    def _ended(self, container: Any) -> Finished | None:
        """How the server ended, when it did (None: still running): never a measurement, even
        when it exited 0 with a line in its log (a server answers asks, it does not end)."""
        from docker.errors import NotFound

        try:
            container.reload()
        except NotFound as exc:  # removed behind the stage's back
            return Finished(exit_code=None, stdout=b"", stderr="", refused=engine_said(exc))
        if container.status in ("running", "paused"):
            return None
        code = int(container.attrs.get("State", {}).get("ExitCode", 1))
        ended = ended_with(container, code or 1)
        return Finished(exit_code=ended.exit_code, stdout=b"",
                        stderr=f"its server ended (exit status {code}); {ended.stderr}")  # fmt: skip


class _Caches:
    """The compile caches of one stage, an image each: a volume made at the image's first arm
    and removed with the stage's ``stack``, after its containers."""

    def __init__(self, client: Any, stack: ExitStack) -> None:
        self.client, self.stack = client, stack
        self.made: dict[str, str | None] = {}  # image → the volume its arms share (None: none)

    def volume(self, image: str, purpose: str, config: dict[str, Any]) -> str | None:
        """The volume the arms of ``image`` (of the inspection ``config``) share (None: the
        engine would not make one; each arm then compiles alone)."""
        from docker.errors import APIError, NotFound

        from ..interrupts import signals_held
        from ..settings import current

        if image not in self.made:
            self.made[image] = None
            if _names_its_own_cache(config):  # a cache the image carries, kept as it is
                return None
            name = container_name(f"{purpose}-cache")
            # Made and its removal registered with interrupts held (as a container's create): a
            # Ctrl-C that lands while the engine makes it is delivered after, and removes it.
            with signals_held(), suppress(APIError):
                volume = self.client.volumes.create(name=name, driver="local", driver_opts=CACHE_VOLUME,
                                                    labels={CONTAINER_LABEL: purpose})  # fmt: skip
                self.made[image] = name
                if not current().keep_containers:
                    self.stack.callback(_quietly, lambda: volume.remove(force=True), (NotFound, APIError))
        return self.made[image]


def _names_its_own_cache(inspected: dict[str, Any]) -> bool:
    """Whether an image's config (its ``inspected`` form) sets ``CACHE_ENV`` (a cache it carries,
    warmed when it was built): its arms then keep it, unshared."""
    config = inspected.get("Config") or {}
    return any(str(e).startswith(f"{CACHE_ENV}=") for e in config.get("Env") or ())


def _by_image(servers: dict[tuple[Any, ...], Any]) -> dict[str, list[Any]]:
    """The servers started (not refused), by image (a key's second part), each image's in the
    order its arms were started."""
    images: dict[str, list[Any]] = {}
    for (_, image, *_), server in servers.items():
        if not isinstance(server, Finished):
            images.setdefault(image, []).append(server)
    return images


def _quietly(call: Any, errors: tuple[type[BaseException], ...]) -> None:
    """``call()``, its ``errors`` ignored (a volume already gone; or one the engine will not
    remove now: a tmpfs, it holds nothing once no container mounts it)."""
    with suppress(*errors):
        call()
