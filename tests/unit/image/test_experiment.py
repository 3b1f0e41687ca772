"""The evaluation's measurements against a fake engine (image/experiment.py, image/bounded.py):
arms interleaved round by round, warm-up discarded, a variant the image cannot run reported, the
budget kept; a hostile workload (prints nothing, prints garbage, hangs past its budget, exits
non-zero) is a clear EvaluationFailed naming the arm, never a crash; and every container is
removed, also when the run times out or is interrupted."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests

from xpu_release.errors import EvaluationFailed
from xpu_release.image import bounded
from xpu_release.image.bounded import Finished, Limits
from xpu_release.image.experiment import MIN_ROUNDS, Arm, measure, order
from xpu_release.manifest.evaluation import EvaluationSpec

from ..fake_volumes import FakeVolumes

LIMITS = Limits(cpuset="0-1", memory_mb=2048)


def spec(**changes: Any) -> EvaluationSpec:
    base = {"command": ["xpu-bench"], "metric": "tokens_per_second", "better": "higher", "rounds": 5}
    return EvaluationSpec.from_dict({**base, **changes})


def line(**values: Any) -> bytes:
    return (json.dumps({"workload": "xpu-bench", "sha256": "ab" * 32, **values}) + "\n").encode()


@dataclass
class FakeRunner:
    """Each image answers with ``answer(image, env)``; every run is logged in order."""

    answer: Callable[[str, dict[str, str]], Finished]
    runs: list[tuple[str, tuple[tuple[str, str], ...]]] = field(default_factory=list)
    clock: list[float] = field(default_factory=lambda: [0.0])
    seconds_per_run: float = 1.0

    def run_bounded(self, image: str, argv: list[str], *, env: dict[str, str], purpose: str,
                    limits: Limits, timeout: float, arm: str = "") -> Finished:  # fmt: skip
        assert purpose == "evaluate"
        assert limits == LIMITS
        self.runs.append((image, tuple(sorted(env.items()))))
        self.clock[0] += min(self.seconds_per_run, timeout)
        return self.answer(image, env)

    def prepare(
        self, image: str, argv: list[str], *, env: dict[str, str], purpose: str, limits: Limits, arm: str = ""
    ) -> None:
        pass  # each run is a process of its own

    def cpu_count(self) -> int:
        return 2

    def now(self) -> float:
        return self.clock[0]


def speeds(**by_image: float) -> Callable[[str, dict[str, str]], Finished]:
    return lambda image, env: Finished(exit_code=0, stdout=line(tokens_per_second=by_image[image]), stderr="")


ARMS = [Arm(image="this", ref="t:2", image_id="new", variant="plain"),
        Arm(image="base", ref="b:1", image_id="old", variant="plain")]  # fmt: skip


def test_arms_are_interleaved_round_by_round_and_the_warm_up_is_discarded() -> None:
    runner = FakeRunner(speeds(new=900.0, old=1000.0))
    got = measure(runner, ARMS, spec(warmup_rounds=1), LIMITS, on_line=lambda _: None)
    images = [image for image, _ in runner.runs]
    assert images == ["new", "old", "old", "new", "new", "old", "old", "new", "new", "old", "old", "new"]
    assert got.rounds == 5
    this = got.of("this", "plain")
    assert this is not None
    assert len(this.runs) == 6  # the warm-up round is kept in the record...
    assert this.figures("tokens_per_second", got.warmup_rounds) == (900.0,) * 5  # ...and never compared


def test_never_all_of_one_arm_then_all_of_another() -> None:
    arms = ["a", "b", "c"]
    rounds = [order(arms, i) for i in range(4)]
    assert rounds == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]


def test_a_variant_the_image_cannot_run_is_reported_and_run_no_more() -> None:
    def answer(image: str, env: dict[str, str]) -> Finished:
        if env and image == "old":
            return Finished(exit_code=0, stdout=line(unsupported="no accelerate here"), stderr="")
        return Finished(exit_code=0, stdout=line(tokens_per_second=1000.0), stderr="")

    accel = (("XPU_BENCH_ACCELERATE", "1"),)
    arms = [*ARMS, Arm(image="this", ref="t:2", image_id="new", variant="+A", env=accel),
            Arm(image="base", ref="b:1", image_id="old", variant="+A", env=accel)]  # fmt: skip
    runner = FakeRunner(answer)
    got = measure(runner, arms, spec(), LIMITS, on_line=lambda _: None)
    base_accel = got.of("base", "+A")
    assert base_accel is not None
    assert base_accel.unsupported == "no accelerate here"
    assert base_accel.runs == []
    assert runner.runs.count(("old", accel)) == 1


def finished(
    exit_code: int | None, stdout: bytes = b"", stderr: str = ""
) -> Callable[[str, dict[str, str]], Finished]:
    return lambda image, env: Finished(exit_code=exit_code, stdout=stdout, stderr=stderr)


HOSTILE = [
    ("prints nothing", finished(0), "printed nothing on stdout"),
    ("prints garbage", finished(0, b"\x00\xff{not json\n"), "last line is not JSON"),
    ("a JSON list", finished(0, b"[1, 2]\n"), "JSON but not an object"),
    ("no metric", finished(0, line(step_seconds=0.1)), "has no 'tokens_per_second' (its numbers: step_"),
    ("a negative metric", finished(0, line(tokens_per_second=-3)), "must be a positive number"),
    ("a metric as text", finished(0, line(tokens_per_second="fast")), "a positive number; got 'fast'"),
    ("a metric that is true", finished(0, line(tokens_per_second=True)), "must be a positive number"),
    ("nested too deep", finished(0, b"[" * 5000 + b"]" * 5000 + b"\n"), "nested 5000 levels deep; the limit"),
    ("400 digits", finished(0, b'{"tokens_per_second": ' + b"9" * 400 + b"}\n"), "longer than 32"),
    ("a NaN", finished(0, b'{"tokens_per_second": NaN}\n'), "NaN is not a JSON number"),
    ("a number beyond a float", finished(0, b'{"tokens_per_second": 1e400}\n'), "beyond a 64-bit float"),
    ("an escape sequence", finished(0, b"\x1b[2J\x1b]0;owned\x07\n"), "\\x1b[2J"),
    ("a huge line", finished(0, b'{"x": "' + b"a" * 100_000 + b'"}\n'), "a line of figures is at most"),
    ("exits non-zero", finished(3, b"", "Traceback\nRuntimeError: boom"), "exited 3; its stderr ends: "),
    ("killed by the OOM killer", finished(137), "exited 137"),
    ("hangs past its budget", finished(None), "still running after"),
    ("unsupported without a reason", finished(0, line(unsupported="")), "must say why"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "answer", "said"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_workload_is_a_clear_failure_naming_the_arm(
    case: str, answer: Callable[[str, dict[str, str]], Finished], said: str
) -> None:
    runner = FakeRunner(answer)
    with pytest.raises(EvaluationFailed) as failed:
        measure(runner, ARMS, spec(), LIMITS, on_line=lambda _: None)
    assert failed.value.exit_code == 18
    message = failed.value.message
    assert message.startswith("t:2 plain: "), message
    assert said in message
    assert len(message) < 600
    assert all(ch.isprintable() or ch == "\n" for ch in message)


def test_a_workload_that_hangs_is_given_no_more_than_the_budget() -> None:
    runner = FakeRunner(finished(None), seconds_per_run=10_000)
    with pytest.raises(EvaluationFailed, match="past the evaluation's budget of 60 s"):
        measure(runner, ARMS, spec(budget_seconds=60), LIMITS, on_line=lambda _: None)
    assert runner.clock[0] == 60  # killed at the budget, not later


def test_a_round_that_would_not_fit_the_budget_is_not_started() -> None:
    runner = FakeRunner(speeds(new=1.0, old=1.0), seconds_per_run=10)  # 20 s per round
    got = measure(runner, ARMS, spec(budget_seconds=160, rounds=10), LIMITS, on_line=lambda _: None)
    # 1 warm-up + 6 rounds = 140 s; a 7th would end at 160 s exactly: with no margin left for a
    # slower round (FIT_MARGIN), it is not started.
    assert got.rounds == 6
    assert got.stopped_early == "the budget of 160 s left room for 6 of 10 rounds"
    assert runner.clock[0] <= 160


def test_a_budget_too_small_for_the_fewest_rounds_fails_saying_what_to_raise() -> None:
    runner = FakeRunner(speeds(new=1.0, old=1.0), seconds_per_run=10)
    with pytest.raises(EvaluationFailed) as failed:
        measure(runner, ARMS, spec(budget_seconds=50), LIMITS, on_line=lambda _: None)
    assert f"at least {MIN_ROUNDS} are needed: raise evaluation.budget_seconds" in failed.value.message


# --- the container is always removed ------------------------------------------------------------


class FakeContainer:
    def __init__(self, wait: Callable[[], dict[str, int]], name: str = "") -> None:
        self._wait = wait
        self.id, self.status, self.attrs = name, "running", {"State": {"ExitCode": 0}}

    def reload(self) -> None:
        pass

    def pause(self) -> None:
        self.status = "paused"

    def unpause(self) -> None:
        self.status = "running"

    def wait(self, timeout: float) -> dict[str, int]:
        return self._wait()

    def logs(self, *, stdout: bool, stderr: bool, tail: int) -> bytes:
        return line(tokens_per_second=5.0) if stdout else b"token=hunter2\n"


@dataclass
class FakeClient:
    wait: Callable[[], dict[str, int]]
    created: list[dict[str, Any]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def volumes(self) -> FakeVolumes:
        if not hasattr(self, "_volumes"):
            self._volumes = FakeVolumes()
        return self._volumes

    @property
    def containers(self) -> FakeClient:
        return self

    @property
    def api(self) -> FakeClient:
        return self

    def run(self, image: str, **kwargs: Any) -> FakeContainer:
        self.created.append(kwargs)
        return FakeContainer(self.wait, kwargs.get("name", ""))

    # A served arm (served.Served): each ask answers as a run of its own would have.
    def exec_create(self, container: str, cmd: list[str]) -> dict[str, str]:
        return {"Id": container}

    def exec_start(self, exec_id: str, stream: bool, demux: bool) -> Iterator[tuple[bytes, bytes]]:
        self._code = self.wait()["StatusCode"]
        said = FakeContainer(self.wait)
        yield said.logs(stdout=True, stderr=False, tail=50), said.logs(stdout=False, stderr=True, tail=20)

    def exec_inspect(self, exec_id: str) -> dict[str, int]:
        return {"ExitCode": self._code}

    def remove_container(self, name: str, force: bool) -> None:
        assert force
        self.removed.append(name)

    def info(self) -> dict[str, Any]:
        return {"NCPU": 2, "Architecture": "x86_64"}

    def inspect_image(self, image: str) -> dict[str, Any]:  # an image of the engine's own machine
        return {"Architecture": "amd64", "Config": {"Env": []}}


def timed_out() -> dict[str, int]:
    said = "read timed out"
    raise requests.exceptions.ReadTimeout(said)


def interrupted() -> dict[str, int]:
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    "wait", [lambda: {"StatusCode": 0}, timed_out, interrupted], ids=["ok", "timeout", "ctrl-c"]
)
def test_every_container_is_removed_with_the_same_limits(wait: Callable[[], dict[str, int]]) -> None:
    client = FakeClient(wait)
    runner = bounded.Containers(client)
    try:
        done = runner.run_bounded(
            "img", ["xpu-bench"], env={"A": "1"}, purpose="evaluate", limits=LIMITS, timeout=5
        )
    except KeyboardInterrupt:
        done = None
    [made] = client.created
    assert client.removed == [made["name"]]
    assert made["cpuset_cpus"] == "0-1"
    assert made["mem_limit"] == made["memswap_limit"] == "2048m"
    assert made["network_mode"] == "none"
    assert made["labels"] == {bounded.CONTAINER_LABEL: "evaluate"}
    if wait is timed_out:
        assert done is not None
        assert done.exit_code is None
    if done is not None:
        assert done.stdout.startswith(b"{")
