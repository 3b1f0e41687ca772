"""A bounded run in a throwaway container: what the evaluation's workload runs in, through the
engine's client. Every run gets the same limits (a CPU set and memory, no swap, no network),
a timeout, and a log the engine keeps small (its output is outside data); the container is
removed afterwards, also on Ctrl-C, unless XPU_RELEASE_KEEP_CONTAINERS=1.

Two ways to run an arm, one answer (``Finished``) each run:

- ``Containers``: each run in a container of its own (any workload: the manifest's command);
- ``Served``: a workload that serves (``workload.serves``: the carried xpu-bench) keeps one
  container an arm for the whole evaluation, started at its first run with ``--serve``, and each
  run is an ``--ask`` in it (``docker exec``): the interpreter is started, PyTorch imported and
  the model compiled once an arm, not once a round.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

from ..guard.limits import MAX_WORKLOAD_LOG_BYTES
from ..secrets import redact

CONTAINER_LABEL = "io.xpu-release.container"  # every throwaway container carries it (engine.py)

T = TypeVar("T")
LOG_LIMIT = f"{MAX_WORKLOAD_LOG_BYTES >> 10}k"  # what the engine keeps of a bounded run's log


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What every container of an evaluation gets alike: a CPU set (``0-1``) and memory."""

    cpuset: str
    memory_mb: int


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


def run(client: Any, image: str, argv: list[str], *, env: dict[str, str], labels: dict[str, str], name: str,
        limits: Limits, timeout: float) -> Finished:  # fmt: skip
    """Run ``argv`` in a container ``name`` of ``image`` for at most ``timeout`` seconds."""
    import requests
    from docker.errors import APIError

    from ..settings import current

    def create() -> Any:
        return _started(client, image, argv, env=env, labels=labels, name=name, limits=limits)

    try:
        with throwaway(client, name, create, keep=current().keep_containers) as container:
            exit_code: int | None
            try:
                exit_code = int(container.wait(timeout=max(timeout, 1.0))["StatusCode"])
            except APIError:  # the engine's answer (an HTTP error, so a RequestException too): below
                raise
            except requests.exceptions.RequestException:  # the read timed out: still running
                exit_code = None
            return _logged(container, exit_code)
    except APIError as exc:
        # The engine would not create, start or follow the container (docker's APIError is an
        # OSError with no file name: left alone it is exit 70). Said as what the engine answered.
        return Finished(exit_code=None, stdout=b"", stderr="", refused=engine_said(exc))


def _started(client: Any, image: str, argv: list[str], *, env: dict[str, str], labels: dict[str, str],
             name: str, limits: Limits) -> Any:  # fmt: skip
    """The container ``name`` running ``argv`` under ``limits``, started (detached)."""
    from docker.types import LogConfig

    return client.containers.run(
        image, command=argv, name=name, detach=True, entrypoint=[], environment=env, labels=labels,
        network_mode="none", cpuset_cpus=limits.cpuset, mem_limit=f"{limits.memory_mb}m",
        memswap_limit=f"{limits.memory_mb}m",
        log_config=LogConfig(type="json-file", config={"max-size": LOG_LIMIT, "max-file": "1"}),
    )  # fmt: skip


def _logged(container: Any, exit_code: int | None) -> Finished:
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


def engine_cpus(client: Any) -> int:
    """The CPUs of the engine behind ``client`` (its machine may not be this one)."""
    return int(client.info().get("NCPU") or 1)


class Containers:
    """The engine as the evaluation asks it (``experiment.Runner``): bounded runs, and how many
    CPUs a CPU set may name."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def prepare(self, image: str, argv: list[str], *, env: dict[str, str], purpose: str,
                limits: Limits, arm: str = "") -> None:  # fmt: skip
        """Nothing: each run starts a container of its own."""

    def run_bounded(self, image: str, argv: list[str], *, env: dict[str, str], purpose: str,
                    limits: Limits, timeout: float, arm: str = "") -> Finished:  # fmt: skip
        return run(self.client, image, argv, env=env, labels={CONTAINER_LABEL: purpose}, name=_named(purpose),
                   limits=limits, timeout=timeout)  # fmt: skip

    def cpu_count(self) -> int:
        return engine_cpus(self.client)


def _named(purpose: str) -> str:
    return f"xpu-release-{purpose}-{uuid.uuid4().hex[:12]}"


ASK_TIMED_OUT = 124  # xpu-bench --ask: no answer within its seconds (the server preparing, or hung)
ASK_GRACE = 1.0  # seconds past an ask's own timeout before its server is stopped


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

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self._open: dict[tuple[Any, ...], Any] = {}
        self._stack = ExitStack()
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
            name, labels = _named(purpose), {CONTAINER_LABEL: purpose}

            def create() -> Any:
                return _started(self.client, image, [*argv, "--serve"], env=env, labels=labels, name=name,
                                limits=limits)  # fmt: skip

            try:
                self._open[key] = self._stack.enter_context(
                    throwaway(self.client, name, create, keep=current().keep_containers)
                )
            except APIError as exc:
                self._open[key] = Finished(exit_code=None, stdout=b"", stderr="", refused=engine_said(exc))
        return self._open[key]

    def _settle(self, program: str, timeout: float) -> None:
        """Every server started answers once, unrecorded, within ``timeout`` in all, then is
        paused. What an answer said is not kept: a server that cannot answer says so again
        when its arm is asked."""
        self._settled = True
        deadline = time.monotonic() + timeout
        for server in [s for s in self._open.values() if not isinstance(s, Finished)]:
            left = deadline - time.monotonic()
            if left > 0:
                self._ask(server, program, left)
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
        ended = _logged(container, code or 1)
        return Finished(exit_code=ended.exit_code, stdout=b"",
                        stderr=f"its server ended (exit status {code}); {ended.stderr}")  # fmt: skip
