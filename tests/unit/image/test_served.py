"""A served arm (image/served.py ``Served``; xpu-bench ``--serve`` and ``--ask``): the workload
is started once an arm and asked once a round.

The protocol runs here for real, without PyTorch (a variant the machine cannot run is answered
as such, ask after ask); the runner is held against a fake engine: one container an arm, started
with ``--serve`` under the same limits, each run an ``--ask`` bounded by the run's timeout, a
server that ended said as a run that ended, and every container removed at the block's end,
also on Ctrl-C."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from docker.errors import APIError
from hypothesis import given, settings
from hypothesis import strategies as st

from xpu_release.guard.limits import MAX_WORKLOAD_LOG_BYTES
from xpu_release.image import bounded, served
from xpu_release.image.bounded import Limits
from xpu_release.image.served import Served
from xpu_release.image.workload import WORKLOADS, serves
from xpu_release.secrets import register

from ...conftest import examples
from ..fake_volumes import FakeVolumes

BENCH = WORKLOADS["xpu-bench"]
LIMITS = Limits(cpuset="0-1", memory_mb=2048)


def bench_env(folder: Path, **more: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("XPU_BENCH_", "CHECKPOINT_"))}
    return {**clean, "PATH": "/nonexistent", "XPU_BENCH_SERVE_DIR": str(folder), **more}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, str]]]:
    env = bench_env(tmp_path, XPU_BENCH_ACCELERATE="1")  # no accelerate here: answered "unsupported"
    started = subprocess.Popen([sys.executable, str(BENCH), "--serve", "--steps", "3"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        yield started, env
    finally:
        started.kill()
        started.wait()


def ask(env: dict[str, str], seconds: str = "20") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), "--ask", seconds], env=env, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip


def test_the_server_answers_every_ask_with_one_line_and_writes_nothing_itself(server: Any) -> None:
    started, env = server
    answers = [ask(env) for _ in range(3)]
    for done in answers:
        assert done.returncode == 0, done.stderr
        [line] = done.stdout.splitlines()
        data = json.loads(line)
        assert data["workload"] == "xpu-bench"
        assert "accelerate library" in data["unsupported"]
    assert started.poll() is None  # still serving
    started.kill()
    out, _ = started.communicate()
    assert out == b""  # its answers go to the asker, never to the container's log


def test_an_ask_that_gets_no_answer_in_time_exits_124_saying_so(server: Any) -> None:
    started, env = server
    assert ask(env).returncode == 0  # the FIFOs are made
    started.kill()
    started.wait()
    began = time.monotonic()
    done = ask(env, "1")
    assert done.returncode == 124
    assert "no answer from the server within 1 s" in done.stderr
    assert done.stdout == ""
    assert time.monotonic() - began < 15


def test_an_ask_before_the_server_made_its_fifos_waits_for_them(tmp_path: Path) -> None:
    env = bench_env(tmp_path, XPU_BENCH_ACCELERATE="1")
    asking = subprocess.Popen([sys.executable, str(BENCH), "--ask", "30"], env=env, stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    time.sleep(0.5)
    started = subprocess.Popen([sys.executable, str(BENCH), "--serve"], env=env, stdout=subprocess.DEVNULL)
    try:
        out, _ = asking.communicate(timeout=30)
        assert asking.returncode == 0
        assert "unsupported" in json.loads(out)
    finally:
        started.kill()
        started.wait()


@pytest.mark.parametrize(
    ("carry", "command", "served"),
    [
        ("xpu-bench", ("xpu-bench", "--steps", "30"), True),
        ("xpu-bench", ("/usr/local/bin/xpu-bench",), True),
        ("xpu-bench", ("ljperf", "--action", "train"), False),  # an image's own tool: a container a run
        (None, ("xpu-bench",), False),  # not carried: whatever xpu-bench the image has may not serve
        ("xpu-bench", (), False),
    ],
)
def test_only_the_carried_workload_is_served(
    carry: str | None, command: tuple[str, ...], served: bool
) -> None:
    assert serves(carry, command) is served


# --- the runner, against a fake engine -------------------------------------------------------------


@dataclass
class FakeContainer:
    id: str
    status: str = "running"
    exit_code: int = 0

    @property
    def attrs(self) -> dict[str, Any]:
        return {"State": {"ExitCode": self.exit_code}}

    killed: bool = False

    def reload(self) -> None:
        pass

    def kill(self) -> None:
        self.killed = True

    def pause(self) -> None:  # as dockerd: only a running container is paused
        if self.status != "running":
            msg = "not running"
            raise APIError(msg)
        self.status = "paused"

    def unpause(self) -> None:
        if self.status != "paused":
            msg = "not paused"
            raise APIError(msg)
        self.status = "running"

    def logs(self, *, stdout: bool, stderr: bool, tail: int) -> bytes:
        return b"" if stdout else b"Traceback (most recent call last):\nRuntimeError: token=hunter2\n"


@dataclass
class FakeEngine:
    """The engine's client as Served asks it: containers.run, api.exec_*, api.remove_container."""

    answers: list[tuple[int, bytes, bytes]] = field(default_factory=list)  # each exec: code, stdout, stderr
    created: list[dict[str, Any]] = field(default_factory=list)
    execs: list[tuple[str, list[str]]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    made: dict[str, FakeContainer] = field(default_factory=dict)
    refuse: str | None = None
    codes: dict[str, int] = field(default_factory=dict)  # each exec's exit status

    @property
    def volumes(self) -> FakeVolumes:
        if not hasattr(self, "_volumes"):
            self._volumes = FakeVolumes()
        return self._volumes

    @property
    def containers(self) -> FakeEngine:
        return self

    @property
    def api(self) -> FakeEngine:
        return self

    def run(self, image: str, **kwargs: Any) -> FakeContainer:
        if self.refuse:
            raise APIError(self.refuse)
        self.created.append({"image": image, **kwargs})
        container = FakeContainer(id=kwargs["name"])
        self.made[kwargs["name"]] = container
        return container

    def exec_create(self, container: str, cmd: list[str]) -> dict[str, str]:
        if self.made[container].status != "running":
            msg = f"container {container} is not running"
            raise APIError(msg)
        self.execs.append((container, cmd))
        return {"Id": str(len(self.execs))}

    def exec_start(
        self, exec_id: str, stream: bool, demux: bool
    ) -> Iterator[tuple[bytes | None, bytes | None]]:
        code, out, err = self.answers.pop(0)
        self.codes[exec_id] = code
        if code == 124:  # the ask's own timeout ran out: it says so at its deadline
            time.sleep(float(self.execs[int(exec_id) - 1][1][-1]))
        if code == SLOW:  # a first ask that compiles first
            time.sleep(0.5)
            code = self.codes[exec_id] = 0
        if code == HANGS:
            time.sleep(3600)  # an --ask that never answers nor ends: only a stopped server ends it
        yield out, None
        yield None, err
        while code == ENDLESS:
            yield b"x" * 65536, None

    def exec_inspect(self, exec_id: str) -> dict[str, int]:
        return {"ExitCode": self.codes[exec_id]}

    def remove_container(self, name: str, force: bool) -> None:
        assert force
        self.removed.append(name)

    def info(self) -> dict[str, Any]:
        return {"NCPU": 2, "Architecture": "x86_64"}

    def inspect_image(self, image: str) -> dict[str, Any]:  # an image of the engine's own machine
        return {"Architecture": "amd64", "Config": {"Env": []}}


ANSWER = b'{"workload": "xpu-bench", "tokens_per_second": 5.0}\n'
HANGS, ENDLESS = -1, -2  # an image's --ask that ignores its timeout; one that writes without end
SLOW = -3  # an ask answered after half a second (a first ask that compiles), exit 0


def run(
    runner: Served, image: str = "img:1", env: dict[str, str] | None = None, timeout: float = 30.0
) -> Any:
    return runner.run_bounded(image, ["xpu-bench", "--steps", "30"], env=env or {}, purpose="evaluate",
                              limits=LIMITS, timeout=timeout)  # fmt: skip


def test_one_container_an_arm_started_to_serve_and_asked_once_a_run() -> None:
    engine = FakeEngine(answers=[(0, ANSWER, b"")] * 6)  # the first run's settling ask, then one a run
    with Served(engine) as runner:
        for _ in range(2):
            assert run(runner).stdout == ANSWER
            assert run(runner, env={"XPU_BENCH_COMPILE": "1"}).exit_code == 0
        assert run(runner, image="img:2").exit_code == 0
        assert engine.removed == []
    assert len(engine.created) == 3  # one an arm, whatever the rounds
    for made in engine.created:
        assert made["command"] == ["xpu-bench", "--steps", "30", "--serve"]
        assert made["cpuset_cpus"] == "0-1"
        assert made["mem_limit"] == made["memswap_limit"] == "2048m"
        assert made["network_mode"] == "none"
        assert made["labels"] == {bounded.CONTAINER_LABEL: "evaluate"}
    assert [cmd for _, cmd in engine.execs][:1] == [["xpu-bench", "--ask", "30.0"]]
    assert sorted(engine.removed) == sorted(m["name"] for m in engine.created)


def test_the_arms_of_one_image_share_one_compile_cache_and_no_other_images_arm_sees_it() -> None:
    # What +CompilerOpt compiles, +CompilerOpt+CkptOpt of the same image finds; an arm of
    # another image (another compiler, perhaps) never loads this image's kernels.
    engine = FakeEngine(answers=[(0, ANSWER, b"")] * 8)
    with Served(engine) as runner:
        for image, env in (("img:1", {}), ("img:1", {"XPU_BENCH_COMPILE": "1"}), ("img:2", {})):
            runner.prepare(image, ["xpu-bench", "--steps", "30"], env=env, purpose="evaluate", limits=LIMITS)
        assert run(runner, image="img:1").exit_code == 0
        assert engine.volumes.removed == []  # kept while the stage's arms run
    mounted = {m["image"]: [] for m in engine.created}
    for made in engine.created:
        [(volume, bind)] = made["volumes"].items()
        assert bind == {"bind": served.CACHE_DIR, "mode": "rw"}
        assert made["environment"][served.CACHE_ENV] == served.CACHE_DIR
        mounted[made["image"]].append(volume)
    assert len(mounted["img:1"]) == 2
    assert len(set(mounted["img:1"])) == 1
    assert set(mounted["img:1"]).isdisjoint(mounted["img:2"])
    for options in engine.volumes.made.values():  # a tmpfs any user of the image writes, bounded
        assert options["driver_opts"] == {"type": "tmpfs", "device": "tmpfs", "o": "size=1g,mode=1777"}
        assert options["labels"] == {bounded.CONTAINER_LABEL: "evaluate"}
    assert sorted(engine.volumes.removed) == sorted(engine.volumes.made)  # none left


def test_a_variant_that_names_its_own_compile_cache_keeps_it() -> None:
    engine = FakeEngine(answers=[(0, ANSWER, b"")] * 2)
    with Served(engine) as runner:
        assert run(runner, env={served.CACHE_ENV: "/opt/kernels"}).exit_code == 0
    [made] = engine.created
    assert made["environment"] == {served.CACHE_ENV: "/opt/kernels"}
    assert "volumes" not in made
    assert engine.volumes.made == {}


def test_an_image_that_carries_its_own_compile_cache_keeps_it() -> None:
    # A cache warmed when the image was built (its config's TORCHINDUCTOR_CACHE_DIR) is its own.
    engine = FakeEngine(answers=[(0, ANSWER, b"")] * 2)
    engine.inspect_image = lambda image: {"Architecture": "amd64",  # type: ignore[method-assign]
                                          "Config": {"Env": [f"{served.CACHE_ENV}=/opt/warm"]}}  # fmt: skip
    with Served(engine) as runner:
        assert run(runner).stdout == ANSWER
    [made] = engine.created
    assert "volumes" not in made
    assert served.CACHE_ENV not in made["environment"]
    assert engine.volumes.made == {}


def test_an_engine_that_will_not_make_the_shared_cache_still_runs_every_arm() -> None:
    engine = FakeEngine(answers=[(0, ANSWER, b"")] * 2)

    def refused(name: str, **_: Any) -> Any:
        said = "volume plugin not found"
        raise APIError(said)

    engine.volumes.create = refused  # type: ignore[method-assign]
    with Served(engine) as runner:
        assert run(runner).stdout == ANSWER  # each arm compiles alone
    [made] = engine.created
    assert "volumes" not in made
    assert served.CACHE_ENV not in made["environment"]


def test_the_servers_first_answers_overlap_as_their_starts_did() -> None:
    # Four arms whose first ask takes 0.5 s each (torch.compile compiles at the first step):
    # settled together, not one after another.
    engine = FakeEngine(answers=[(SLOW, ANSWER, b"")] * 4 + [(0, ANSWER, b"")])
    with Served(engine) as runner:
        for n in range(4):
            runner.prepare(f"img:{n}", ["xpu-bench"], env={}, purpose="evaluate", limits=LIMITS)
        began = time.monotonic()
        assert runner.run_bounded("img:0", ["xpu-bench"], env={}, purpose="evaluate", limits=LIMITS,
                                  timeout=30).stdout == ANSWER  # fmt: skip
        assert time.monotonic() - began < 1.5  # 2 s one after another
        assert len(engine.execs) == 5
        # Settled, each paused but the one asked (paused again after its answer).
        assert {c.status for c in engine.made.values()} == {"paused"}


def test_the_servers_of_one_image_settle_one_after_another_and_the_images_at_once() -> None:
    # What +CompilerOpt compiles into the image's shared cache, +CompilerOpt+CkptOpt then finds
    # (asked at once, both would compile it); another image's servers do not wait for them.
    engine = FakeEngine(answers=[(SLOW, ANSWER, b"")] * 4 + [(0, ANSWER, b"")])
    asked: dict[str, float] = {}
    create = engine.exec_create

    def timed(container: str, cmd: list[str]) -> dict[str, str]:
        asked.setdefault(container, time.monotonic())
        return create(container, cmd)

    engine.exec_create = timed  # type: ignore[method-assign]
    with Served(engine) as runner:
        for image in ("img:0", "img:1"):
            for env in ({}, {"XPU_BENCH_COMPILE": "1"}):
                runner.prepare(image, ["xpu-bench"], env=env, purpose="evaluate", limits=LIMITS)
        assert runner.run_bounded("img:0", ["xpu-bench"], env={}, purpose="evaluate", limits=LIMITS,
                                  timeout=30).stdout == ANSWER  # fmt: skip
    by_image: dict[str, list[float]] = {}
    for made in engine.created:
        by_image.setdefault(made["image"], []).append(asked[made["name"]])
    for first, second in by_image.values():
        assert second - first >= 0.45  # the second asked once the first had answered (0.5 s)
    assert abs(by_image["img:0"][0] - by_image["img:1"][0]) < 0.25  # the images at once


def test_an_ask_bounded_by_the_run_timeout_that_times_out_is_a_run_still_going() -> None:
    said = b"xpu-bench: no answer from the server within 0.3 s\n"
    engine = FakeEngine(answers=[(0, ANSWER, b""), (124, b"", said)])
    with Served(engine) as runner:
        done = run(runner, timeout=0.3)
    assert engine.execs[-1][1] == ["xpu-bench", "--ask", "0.3"]
    assert done.exit_code is None


def test_an_ask_that_gives_up_long_before_its_timeout_is_the_workload_failing() -> None:
    # An image's --ask that says "no answer" at once is not a run still going at the deadline.
    engine = FakeEngine(answers=[(0, ANSWER, b""), (124, b"", b"no answer\n")])
    engine.answers[1] = (1240, b"", b"no answer\n")  # 124 said at once (the fake sleeps only for 124)
    with Served(engine) as runner:
        done = run(runner, timeout=30.0)
    assert done.exit_code == 1240


def test_a_server_that_ended_is_said_as_a_run_that_ended_its_stderr_redacted() -> None:
    register("hunter2")
    engine = FakeEngine(answers=[(0, ANSWER, b"")] * 2)
    with Served(engine) as runner:
        assert run(runner).exit_code == 0
        [container] = engine.made.values()
        container.status, container.exit_code = "exited", 137  # out of memory, say
        done = run(runner)
    assert done.exit_code == 137
    assert "its server ended (exit status 137)" in done.stderr
    assert "RuntimeError: token=***" in done.stderr
    assert "hunter2" not in done.stderr


def test_an_engine_that_will_not_start_the_server_is_a_refusal_and_nothing_is_left() -> None:
    engine = FakeEngine(refuse="exec: xpu-bench: not found")
    with Served(engine) as runner:
        done = run(runner)
    assert done.refused is not None
    assert "not found" in done.refused
    assert engine.created == []


def test_every_server_is_removed_on_ctrl_c() -> None:
    engine = FakeEngine(answers=[(0, ANSWER, b"")] * 3)

    def interrupted() -> None:
        with Served(engine) as runner:
            run(runner)
            run(runner, image="img:2")
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted()
    assert len(engine.removed) == 2


def test_an_answer_is_read_bounded_however_much_the_image_writes() -> None:
    engine = FakeEngine(answers=[(ENDLESS, b"", b"")] * 2)
    with Served(engine) as runner:
        done = run(runner)
    assert done.exit_code == 1
    assert f"more than {MAX_WORKLOAD_LOG_BYTES} bytes in answer to one ask" in done.stderr
    assert done.stdout == b""


def test_an_ask_that_ignores_its_timeout_stops_its_server_at_our_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(served, "ASK_GRACE", 0.2)
    engine = FakeEngine(answers=[(0, ANSWER, b""), (HANGS, b"", b"")])
    began = time.monotonic()
    with Served(engine) as runner:
        done = run(runner, timeout=0.5)
        [container] = engine.made.values()
    assert done.exit_code is None  # a run still going at its deadline
    assert time.monotonic() - began < 5
    assert container.killed


class Streamed:
    """An engine whose exec streams ``chunks`` (as docker's demuxed stream: stdout or stderr)."""

    def __init__(self, chunks: list[tuple[bytes | None, bytes | None]]) -> None:
        self.chunks = chunks

    def exec_start(
        self, exec_id: str, stream: bool, demux: bool
    ) -> Iterator[tuple[bytes | None, bytes | None]]:
        yield from self.chunks


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=64), st.integers(1, 600_000).map(lambda n: b"o" * n)),
            st.one_of(st.none(), st.binary(max_size=64), st.integers(1, 600_000).map(lambda n: b"e" * n)),
        ),
        max_size=12,
    )
)
def test_an_answer_keeps_what_the_image_wrote_or_says_it_wrote_too_much(
    chunks: list[tuple[bytes | None, bytes | None]],
) -> None:
    got = served._Answer()
    got.read(Streamed(chunks), "1")
    wrote = sum(len(o or b"") + len(e or b"") for o, e in chunks)
    kept = len(got.out) + len(got.err)
    biggest = max((len(o or b"") + len(e or b"") for o, e in chunks), default=0)
    assert kept <= MAX_WORKLOAD_LOG_BYTES + biggest  # never more than the bound and the chunk that crossed it
    assert got.over == (wrote > MAX_WORKLOAD_LOG_BYTES and kept > MAX_WORKLOAD_LOG_BYTES)
    if not got.over:
        assert bytes(got.out) == b"".join(o or b"" for o, _ in chunks)
        assert bytes(got.err) == b"".join(e or b"" for _, e in chunks)
    assert got.failed is None
