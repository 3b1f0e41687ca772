"""Found by review: the evaluation's served arms (image/bounded.py ``Served``, image/experiment.py
``measure``, xpu-bench ``--serve``/``--ask``), held against an engine-free fake in the style of
tests/unit/image/test_served.py. The fake engine keeps a clock of its own: a container's first ask
waits for its server to prepare (import, compile), each ask takes the seconds the case says, and
``measure`` reads that clock, so the budget is held as the stage holds it. Each test names the
defect and the rule it breaks; each fails on the code as reviewed."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests
from docker.errors import APIError, NotFound

from xpu_release.errors import EvaluationFailed
from xpu_release.image.bootstrap import Judgement, Verdict
from xpu_release.image.bounded import Limits
from xpu_release.image.evaluation import Comparison
from xpu_release.image.experiment import Arm, Measurement, measure
from xpu_release.image.served import CACHE_ENV, Served
from xpu_release.manifest.evaluation import EvaluationSpec
from xpu_release.release.run.evaluate import _what_would_decide

from ..fake_volumes import FakeVolumes

LIMITS = Limits(cpuset="0-1", memory_mb=2048)
HANG = -1.0  # an ask's seconds: it never answers nor ends (an image whose --ask ignores its timeout)


def spec(**changes: Any) -> EvaluationSpec:
    base = {"carry": "xpu-bench", "command": ["xpu-bench", "--steps", "30"], "metric": "tokens_per_second",
            "better": "higher", "rounds": 5}  # fmt: skip
    return EvaluationSpec.from_dict({**base, **changes})


def line(figure: float) -> bytes:
    said = {"workload": "xpu-bench", "sha256": "ab" * 32, "tokens_per_second": figure}
    return (json.dumps(said) + "\n").encode()


@dataclass
class Box:
    """A container of the fake engine: its server, how many asks it answered, how it ended."""

    id: str
    image: str
    env: dict[str, str]
    created_at: float
    status: str = "running"
    exit_code: int = 0
    asked: int = 0
    killed: bool = False
    stdout_log: bytes = b""
    stderr_log: bytes = b"Traceback (most recent call last):\nRuntimeError: the server ended\n"
    gone: bool = False  # removed behind our back (docker rm -f, a prune of stopped containers)
    ended: threading.Event = field(default_factory=threading.Event)

    @property
    def attrs(self) -> dict[str, Any]:
        return {"State": {"ExitCode": self.exit_code}}

    def reload(self) -> None:
        if self.gone:
            msg = f"No such container: {self.id}"
            raise NotFound(msg)

    def kill(self) -> None:
        self.killed, self.status, self.exit_code = True, "exited", 137
        self.ended.set()

    # What a runner may do to a container it is not asking (a frozen cgroup uses no CPU).
    def pause(self) -> None:  # as dockerd: only a running container is paused
        if self.status != "running":
            msg = f"Container {self.id} is not running"
            raise APIError(msg)
        self.status = "paused"

    def unpause(self) -> None:
        if self.status != "paused":
            msg = f"Container {self.id} is not paused"
            raise APIError(msg)
        self.status = "running"

    def stop(self, **_: Any) -> None:
        self.status = "exited"
        self.ended.set()

    def logs(self, *, stdout: bool, stderr: bool, tail: int) -> bytes:
        return self.stdout_log if stdout else self.stderr_log


# What one ask does: (its exit code, its stdout, its stderr, the seconds it takes), given the
# container asked, the engine (its clock, its other containers) and the ask's own timeout.
Answer = Callable[[Box, "Clocked", float], tuple[int, bytes, bytes, float]]


@dataclass
class Clocked:
    """The engine's client as ``Served`` asks it (containers.run, api.exec_*, remove_container),
    with a clock: ``now`` moves by what each request and each ask takes."""

    answer: Answer
    now: float = 0.0
    create_seconds: float = 0.0
    boxes: dict[str, Box] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    execs: dict[str, tuple[Box, float]] = field(default_factory=dict)
    codes: dict[str, int] = field(default_factory=dict)
    after_ask: Callable[[Box], None] | None = None

    @property
    def volumes(self) -> FakeVolumes:
        if not hasattr(self, "_volumes"):
            self._volumes = FakeVolumes()
        return self._volumes

    @property
    def containers(self) -> Clocked:
        return self

    @property
    def api(self) -> Clocked:
        return self

    def clock(self) -> float:
        return self.now

    def run(self, image: str, **kwargs: Any) -> Box:
        self.now += self.create_seconds
        env = dict(kwargs.get("environment") or {})
        box = Box(id=kwargs["name"], image=image, env=env, created_at=self.now)
        self.boxes[box.id] = box
        return box

    def exec_create(self, container: str, cmd: list[str]) -> dict[str, str]:
        box = self.boxes[container]
        if box.gone:
            msg = f"No such container: {container}"
            raise NotFound(msg)
        if box.status != "running":
            msg = f"Container {container} is not running"
            raise APIError(msg)
        exec_id = str(len(self.execs) + 1)
        self.execs[exec_id] = (box, float(cmd[-1]))
        return {"Id": exec_id}

    def exec_start(
        self, exec_id: str, stream: bool, demux: bool
    ) -> Iterator[tuple[bytes | None, bytes | None]]:
        box, timeout = self.execs[exec_id]
        code, out, err, seconds = self.answer(box, self, timeout)
        if seconds == HANG:
            box.ended.wait(120)  # only a stopped server ends it
            self.codes[exec_id] = 137
            return
        self.now += seconds
        box.asked += 1
        self.codes[exec_id] = code
        if self.after_ask is not None:
            self.after_ask(box)
        yield out, err

    def exec_inspect(self, exec_id: str) -> dict[str, Any]:
        return {"ExitCode": self.codes.get(exec_id)}

    def remove_container(self, name: str, force: bool) -> None:
        self.removed.append(name)
        if name in self.boxes:
            self.boxes[name].status = "removed"
            self.boxes[name].ended.set()

    def info(self) -> dict[str, Any]:
        return {"NCPU": 2, "Architecture": "x86_64"}

    def inspect_image(self, image: str) -> dict[str, Any]:  # an image of the engine's own machine
        return {"Architecture": "amd64", "Config": {"Env": []}}


def arms_of(*images: str, variants: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]) -> list[Arm]:
    return [Arm(image=image, ref=f"{image}:1", image_id=f"sha256:{image}", variant=name, env=env)
            for image in images for name, env in variants]  # fmt: skip


COMPILE = ("XPU_BENCH_COMPILE", "1")
COMPILED = (
    ("+CompilerOpt", (COMPILE,)),
    ("+CompilerOpt+CkptOpt", (COMPILE, ("CHECKPOINT_OPTIMIZATION", "true"))),
)
PLAIN = (("plain", ()),)


def quiet(_: str) -> None:
    pass


def measured(engine: Clocked, arms: list[Arm], **changes: Any) -> Measurement | Exception:
    """What the stage's ``measure`` gives with ``engine`` serving ``arms`` (every container
    removed at the end), or what it raised."""
    try:
        with Served(engine, engine.clock) as runner:
            return measure(runner, arms, spec(**changes), LIMITS, on_line=quiet)
    except Exception as exc:  # what escapes is the subject of some findings
        return exc


# --- the budget ------------------------------------------------------------------------------------


def test_the_served_warm_up_round_does_not_use_up_the_room_of_the_measured_rounds() -> None:
    """Defect: in served mode the warm-up round carries every arm's one-time start (import, and
    torch.compile: 160-242 s for four compiled arms in the docs and the commit's own figures),
    while a measured round takes a few seconds; ``_Rounds.next`` fits a round by the longest
    round so far, the warm-up included, times 1.25. With the training image's six compiled arms
    against base and previous (60 s each to prepare, 1 s an ask), the warm-up ends at 360 s and
    no round 'fits' a 600 s budget although five rounds need 30 s: the stage fails with exit 18
    telling the user to raise evaluation.budget_seconds. Rule broken: the budget decides how many
    rounds run (docs: a round is started if it fits what is left), and a well-behaved workload
    within its budget is not an EvaluationFailed."""

    def answer(box: Box, engine: Clocked, timeout: float) -> tuple[int, bytes, bytes, float]:
        seconds = 60.0 if box.asked == 0 else 1.0  # the first ask waits for the server's compile
        return 0, line(1000.0), b"", min(seconds, timeout)

    engine = Clocked(answer)
    got = measured(engine, arms_of("this", "base", "previous", variants=COMPILED), budget_seconds=600)
    assert isinstance(got, Measurement), got
    assert got.rounds == 5
    assert engine.now <= 600


def test_the_served_arms_start_is_counted_in_the_stages_budget() -> None:
    """Defect: ``measure`` starts every served arm's container (``runner.prepare``) before
    ``_Rounds`` takes the clock, so the engine's time creating and starting them is outside
    ``budget_seconds`` and outside the record's ``seconds``. Here the engine takes 200 s for
    each of two containers: the stage runs 400 s of engine requests and then a full 300 s budget
    of rounds, and the record says it took 12 s. Rule broken: the stage's time budget
    (``budget_seconds``: 'the stage's time budget'; no hang past it)."""
    engine = Clocked(lambda box, engine, timeout: (0, line(1000.0), b"", 1.0), create_seconds=200.0)
    got = measured(engine, arms_of("this", "base", variants=PLAIN), budget_seconds=300)
    if isinstance(got, EvaluationFailed):
        return  # said as a budget that ran out: held
    assert isinstance(got, Measurement), got
    assert engine.now <= 300, f"the stage took {engine.now:.0f} s of a 300 s budget (record: {got.seconds} s)"


def test_an_ask_that_ignores_its_timeout_is_stopped_at_the_runs_deadline() -> None:
    """Defect: ``Served._ask`` waits for an ask its own timeout plus ``ASK_GRACE`` (10 s) before it
    stops the server, and up to ``ASK_GRACE`` more for the reader; the timeout it is given is what
    is left of the budget. A compared image (a hostile 'previous') whose xpu-bench --ask ignores
    its timeout keeps the stage 10-20 s past its budget, where a run in a container of its own
    (``container.wait(timeout)``) ends at the deadline. Rule broken: docs 'The budget: no run may go
    past it'; never a hang past the stage's budget."""
    engine = Clocked(lambda box, engine, timeout: (0, b"", b"", HANG))
    began = time.monotonic()
    with Served(engine) as runner:
        done = runner.run_bounded("sha256:previous", ["xpu-bench", "--steps", "30"], env={},
                                  purpose="evaluate", limits=LIMITS, timeout=0.5)  # fmt: skip
    took = time.monotonic() - began
    assert done.exit_code is None
    assert took < 0.5 + 2.0, f"a run given 0.5 s of budget returned after {took:.1f} s"


def test_the_seconds_said_to_decide_count_a_measured_rounds_pace_not_the_served_start() -> None:
    """Defect: ``_what_would_decide`` prices a round at the stage's seconds over all its rounds,
    the warm-up included; in served mode the warm-up is every arm's start and compile, so the
    stage's line ('about N rounds, some S s of budget, would decide it') overstates the budget
    needed many times over. Here a measured round takes 2 s and the warm-up 120 s: 30 more rounds
    need about 62 s, the line says several hundred. Rule broken: what the stage says is what was
    measured (the advice is how the user sets budget_seconds)."""

    def answer(box: Box, engine: Clocked, timeout: float) -> tuple[int, bytes, bytes, float]:
        return 0, line(1000.0), b"", 60.0 if box.asked == 0 else 1.0

    got = measured(Clocked(answer), arms_of("this", "base", variants=PLAIN))
    assert isinstance(got, Measurement), got
    open_ = Comparison(variant="plain", against="base", against_ref="base:1",
                       judgement=Judgement(ratio=0.9, low=0.8, high=1.0, verdict=Verdict.UNDECIDED, rounds=5,
                                           rounds_needed=30))  # fmt: skip
    said = _what_would_decide([open_], got)
    seconds = float(said.split("some ")[1].split(" s")[0])
    # budget_seconds holds the whole stage: the start once (the two servers' 60 s each, and the
    # warm-up round), then 2 s a measured round.
    start = got.seconds - got.rounds * 2.0
    assert seconds <= 1.1 * (start + 30 * 2.0), said
    assert seconds >= start + 30 * 2.0 - 1, said


# --- what the arms are -----------------------------------------------------------------------------


def test_two_arms_of_the_same_image_and_variant_get_a_container_each() -> None:
    """Defect: ``Served`` keys a container by (image, command, environment, limits), not by arm, so
    two arms of the same image and variant share one server: ``evaluate REF --against REF`` (an
    A/A check), a previous release whose tested image is this one, and bench/evaluate.py
    --mode engine's A/A case (both arms ``image_id=image``, env ()) all compare one process with
    itself, round after round. The A/A check then cannot see what a per-arm process adds (its
    memory layout, its threads, its compiled code, persistent for the stage), which is the new
    risk of serving; and the record's method.runs ('one container an arm, asked each round') and
    the notes ('one container per image and variant') say otherwise. Rule broken: each arm gets
    one long-lived container of its own; the record says how the arms ran."""
    engine = Clocked(lambda box, engine, timeout: (0, line(1000.0), b"", 1.0))
    arms = [Arm(image="this", ref="t:1", image_id="sha256:same", variant="plain"),
            Arm(image="against", ref="t:1", image_id="sha256:same", variant="plain")]  # fmt: skip
    got = measured(engine, arms)
    assert isinstance(got, Measurement), got
    assert got.rounds == 5
    assert len(engine.boxes) == 2, f"{len(engine.boxes)} container(s) served the two arms"


def test_no_measured_round_overlaps_another_arms_server_still_preparing() -> None:
    """Defect: ``measure`` starts every arm's server at once (``prepare``: 'their preparing
    overlaps'), on the same CPU set, and relies on the warm-up round to absorb it (notes: 'its
    start, import and compile in the warm-up'). ``warmup_rounds: 0`` is valid (0 to 5), and then
    the first measured round runs this image's plain arm, always first, while the compiled arms'
    servers are still compiling beside it: its figure is taken under their load, the reference's
    later in the round on a quiet machine, a bias against this image that the starved-round rule
    (half the median) does not catch. Here a figure measured while another server prepares is
    0.6 of the quiet one. Rule broken: arms are measured under the same conditions (interleaving
    exists so that load weighs on every arm alike); the notes' claim."""
    prep = {(): 3.0, (COMPILE,): 40.0}

    def ready_at(box: Box) -> float:
        own = {k: v for k, v in box.env.items() if k != CACHE_ENV}  # the shared compile cache aside
        return box.created_at + prep[tuple(sorted(own.items()))]

    def answer(box: Box, engine: Clocked, timeout: float) -> tuple[int, bytes, bytes, float]:
        starts = max(engine.now, ready_at(box))  # the ask waits for its server, then measures
        busy = any(ready_at(other) > starts for other in engine.boxes.values() if other is not box)
        return 0, line(600.0 if busy else 1000.0), b"", starts - engine.now + 1.0

    engine = Clocked(answer)
    got = measured(engine, arms_of("this", "base", variants=(("plain", ()), COMPILED[0])), warmup_rounds=0)
    assert isinstance(got, Measurement), got
    for arm in got.arms:
        figures = arm.figures("tokens_per_second", got.warmup_rounds)
        assert set(figures) == {1000.0}, f"{arm.arm.label}: {figures}"


# --- a server that ended, an engine that lost it ----------------------------------------------------


def test_a_server_that_ended_is_never_a_measurement() -> None:
    """Defect: when the server has ended, ``_ask`` says it as a run that ended (``_ended``: its
    exit status and its container log). A server that exited 0 with a figures line in its log
    (an image's xpu-bench that ignores --serve and runs once, or one that stops serving after
    N asks) is then taken as a successful run: every later round 'measures' the same stale line
    without asking anything, and the record keeps N identical figures as N rounds. Rule broken:
    each round's figure is measured in that round; a server that cannot answer is the workload
    failing (EvaluationFailed naming the arm)."""

    def answer(box: Box, engine: Clocked, timeout: float) -> tuple[int, bytes, bytes, float]:
        return 0, line(1000.0), b"", 1.0

    def ends_after_one_ask(box: Box) -> None:
        if box.image == "sha256:base":
            box.status, box.exit_code, box.stdout_log = "exited", 0, line(5000.0)

    engine = Clocked(answer, after_ask=ends_after_one_ask)
    got = measured(engine, arms_of("this", "base", variants=PLAIN))
    asked = sum(1 for box, _ in engine.execs.values() if box.image == "sha256:base")
    if isinstance(got, Measurement):
        base = got.of("base", "plain")
        assert base is not None
        pytest.fail(f"base 'measured' {[r['tokens_per_second'] for r in base.runs]} from {asked} ask(s)")
    assert isinstance(got, EvaluationFailed), got
    assert got.message.startswith("base:1 plain")


def test_an_ask_that_gives_up_at_once_is_not_said_as_the_budget_running_out() -> None:
    """Defect: ``_ask`` says an ask's exit 124 ('no answer within SECONDS') as a run still going
    at its deadline whenever it comes; an image whose --ask exits 124 at once, with most of the
    budget left, makes the stage say 'still running after 0 s, past the evaluation's budget of
    600 s' (or, past 5 rounds, stop with stopped_early 'the budget of 600 s ran out during round
    N', written into the record and the notes). Rule broken: the record's and the messages'
    claims are what happened; a failing workload is a clear EvaluationFailed naming the arm."""

    def answer(box: Box, engine: Clocked, timeout: float) -> tuple[int, bytes, bytes, float]:
        if box.image == "sha256:base":
            return 124, b"", b"xpu-bench: no answer from the server within 600 s\n", 0.0
        return 0, line(1000.0), b"", 1.0

    got = measured(Clocked(answer), arms_of("this", "base", variants=PLAIN), budget_seconds=600)
    assert isinstance(got, EvaluationFailed), got
    assert got.message.startswith("base:1 plain"), got.message
    assert "budget" not in got.message, got.message


def test_a_served_container_removed_behind_the_stages_back_is_an_evaluation_failure() -> None:
    """Defect: when an ask finds no container to exec in, ``_ask`` asks ``_ended`` how the server
    ended, and ``_ended``'s ``container.reload()`` raises docker's NotFound when the container is
    gone (removed by hand or by a prune of stopped containers after its server died). The APIError
    escapes ``run_bounded`` (where ``Containers`` says every APIError as a refusal) and the command
    line says 'the Docker engine cannot be used (...); check DOCKER_HOST' (exit 10) instead of
    naming the arm. Rule broken: an arm that cannot be measured is a clear EvaluationFailed naming
    the arm."""

    def answer(box: Box, engine: Clocked, timeout: float) -> tuple[int, bytes, bytes, float]:
        return 0, line(1000.0), b"", 1.0

    def gone_after_two(box: Box) -> None:
        if box.image == "sha256:base" and box.asked == 2:
            box.status, box.exit_code, box.gone = "exited", 137, True

    got = measured(Clocked(answer, after_ask=gone_after_two), arms_of("this", "base", variants=PLAIN))
    assert isinstance(got, EvaluationFailed), f"{type(got).__name__}: {got}"
    assert got.message.startswith("base:1 plain")


def test_an_engine_that_broke_off_an_ask_is_not_said_as_the_budget_running_out() -> None:
    """Defect: ``_ask`` says a requests error of the engine (the connection refused or broken as
    the exec starts) as a run still going at its deadline. Past 5 rounds ``measure`` then stops and
    compares what it has, and the record's ``stopped_early`` (and the notes) say 'the budget of
    600 s ran out during round 6 of 10' with 590 s of it left; before 5 rounds the message says the
    workload 'was still running ... past the evaluation's budget (does it hang?)'. Rule broken: the
    record's claims are what happened (an engine that failed is said as the engine)."""

    def answer(box: Box, engine: Clocked, timeout: float) -> tuple[int, bytes, bytes, float]:
        if box.image == "sha256:base" and box.asked == 6:
            msg = "the engine went away"
            raise requests.exceptions.ConnectionError(msg)
        return 0, line(1000.0), b"", 1.0

    engine = Clocked(answer)
    got = measured(engine, arms_of("this", "base", variants=PLAIN), rounds=10, budget_seconds=600)
    said = got.stopped_early if isinstance(got, Measurement) else str(got)  # or said as what failed
    assert engine.now < 30
    assert "budget" not in (said or ""), said


# --- one arm's container beside another's measurement -----------------------------------------------


def test_a_compared_images_server_cannot_slow_this_images_measured_asks() -> None:
    """Defect: every served container lives for the whole stage on the same CPU set, running while
    the other arms are asked; nothing holds a server idle between its asks (docs: 'idle between its
    asks (a server waiting for an ask uses no CPU)' is what the shipped xpu-bench does, not what is
    enforced). A compared image may be hostile (its /usr/local/bin/xpu-bench may be anything while
    its label claims the same sha256): its --serve can compute between its own asks, so this
    image's asks run beside it and measure slower while the base's do not. Here the 'previous'
    server spins on this image's turns (it counts its own asks; the rotation is fixed and
    documented): this image measures 0.6 of its speed against its base,
    a 'regression' against base that the release cannot have, stopping it (exit 17) or skewing the
    contributions table. With a container a run, an image could only ever weigh on its own figures.
    Rule broken: a hostile compared image cannot change how this image measures; arms run under the
    same conditions."""

    def spinning(box: Box) -> bool:
        return box.image == "sha256:previous" and box.asked >= 1 and box.status == "running"

    def answer(box: Box, engine: Clocked, timeout: float) -> tuple[int, bytes, bytes, float]:
        # The hostile server spins on this image's turns only: it counts its own asks, and the
        # rotation of the rounds is fixed (order(): rotated by one each round).
        others = [o for o in engine.boxes.values() if o is not box]
        beside = box.image == "sha256:this" and any(spinning(o) for o in others)
        return 0, line(600.0 if beside else 1000.0), b"", 1.0

    got = measured(Clocked(answer), arms_of("this", "base", "previous", variants=PLAIN))
    if isinstance(got, EvaluationFailed):  # the busy server found and named: held
        assert got.message.startswith("previous:1 plain"), got.message
        return
    assert isinstance(got, Measurement), got
    for image in ("this", "base"):
        arm = got.of(image, "plain")
        assert arm is not None
        assert set(arm.figures("tokens_per_second", got.warmup_rounds)) == {1000.0}, (image, arm.runs)
