"""Found by review: a variant that names what it is compared with (``evaluation.variants[].against``:
manifest/evaluation.py, release/run/evaluate.py, image/evaluation.py ``compare``,
release/run/evalnotes.py) and the served arms settled all at once (image/served.py
``Served._settle``). Each test names the behaviour the product should have; each fails on the
code as reviewed (c177f9c), for the reason its comment gives."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from xpu_release.image import served
from xpu_release.image.evaluation import NOT_COMPARED, Reference
from xpu_release.image.served import Served
from xpu_release.manifest import Repo
from xpu_release.release.model import record as records
from xpu_release.release.run.evaluate import evaluate_image

from ..helpers import run, write_manifest
from ..image.test_served import ANSWER, HANGS, LIMITS, FakeEngine
from ..release.test_evaluate import IDS, REF, Fake, evaluated
from ..release.test_record import COMPLETE

NEXT = "training-cpu-pytorch:25.04"  # a release of the training image that extends 25.03
BASE = "pytorch-cpu-sdk:2.13.0"  # 25.03's base, as its manifest names it


def next_release(repo: Path, evaluation: str) -> None:
    write_manifest(repo, "training-cpu-pytorch", "25.04", (
        'image: training-cpu-pytorch\nversion: "25.04"\nextends: "25.03"\n'
        "release: {highlights: [{en: the same, zh: 相同}]}\n" + evaluation
    ))  # fmt: skip


# --- a variant's `against` ------------------------------------------------------------------------


def test_a_release_that_narrows_what_it_is_compared_with_is_not_blamed_on_the_release_it_extends(
    repo: Path,
) -> None:
    # 25.03 compares its compiled variants with the previous release only (`against: [previous]`).
    # A 25.04 that extends it and changes only its evaluation's `against` to [base] was a valid
    # manifest before variants named their own; now `validate training-cpu-pytorch:25.04` refuses
    # it with two problems located in manifests/training-cpu-pytorch/25.03.yaml (lines 70 and 73,
    # "add it there first"): a released manifest that validates on its own, not the line of
    # 25.04 that made the conflict. Either the inherited variants follow the narrowed `against`
    # (compared with what is left of it), or the refusal points at the child's own line.
    next_release(repo, "evaluation:\n  against: [base]\n")
    assert run(repo, "validate", "training-cpu-pytorch:25.03").exit_code == 0
    result = run(repo, "validate", NEXT)
    assert "Traceback" not in result.stderr
    if result.exit_code != 0:
        assert result.exit_code == 2, result.stderr
        located = [x for x in result.stderr.splitlines() if x.startswith("error: manifests/")]
        assert located, result.stderr
        assert all(x.startswith("error: manifests/training-cpu-pytorch/25.04.yaml:") for x in located), (
            result.stderr
        )


def test_an_image_named_with_against_is_compared_even_when_the_manifest_compares_nothing_with_its_role(
    repo: Path,
) -> None:
    # `evaluate training-cpu-pytorch:25.04 --against pytorch-cpu-sdk:2.13.0` compares with that
    # image "instead of the manifest's references" (docs/using/evaluation.md, "The command alone");
    # `named` gives it the role `base` because it is 25.04's base. With 25.04's evaluation
    # `against: [previous]`, `EvaluationSpec.compares(name, "base")` is then False for every
    # variant and for plain: no arm of the named image runs at all and the command says
    # "NOT COMPARED: compared with no other image (it names no image)" — though the person named
    # one, which the engine holds and which carries the same workload. Before this change every
    # variant was compared with it.
    next_release(repo, "evaluation:\n  against: [previous]\n")
    spec = Repo(repo).load_ref(NEXT)
    fake = Fake(speed={IDS["this"]: 1000.0, IDS["base"]: 1000.0})
    named = Reference(role="against", ref=BASE, image_id=IDS["base"])
    got = evaluate_image(spec, fake, IDS["this"], (named,), on_line=lambda _: None, runner=fake)
    assert got is not None
    assert any(image == IDS["base"] for image, _ in fake.ran), "the image named with --against never ran"
    plain = next((c for c in got.comparisons if (c.variant, c.against_ref) == ("plain", BASE)), None)
    assert plain is not None, [(c.variant, c.against, c.note) for c in got.comparisons]
    assert plain.judgement is not None
    assert got.entry["status"] != NOT_COMPARED, got.entry["reason"]


def test_diff_says_every_variant_both_records_measured_even_one_not_compared_with_the_old_release(
    repo: Path,
) -> None:
    # 25.03's record measured +Accelerate; 25.04 measured it too, but compares it with its base
    # only (`against: [base]`). `diff 25.03 25.04` takes NEW's comparisons with OLD when there are
    # any ("direct"), so the variants compared with 25.03 are shown and +Accelerate, measured in
    # both records, is silently left out: neither its comparison (there is none) nor, as for a
    # release compared with nothing, its medians of the two records.
    old = evaluated(repo, REF, Fake(speed={IDS["this"]: 1000.0, IDS["base"]: 1000.0}), "base")
    records.write(
        replace(COMPLETE, ref=REF, evaluation=old.entry), records.default_path(repo, *REF.split(":"))
    )
    next_release(repo, (
        "evaluation:\n  variants:\n"
        "    - {name: +CkptOpt, env: {CHECKPOINT_OPTIMIZATION: 'true'}}\n"
        "    - {name: +Accelerate, env: {XPU_BENCH_ACCELERATE: '1'}, against: [base]}\n"
    ))  # fmt: skip
    fake = Fake(speed={IDS["this"]: 500.0, IDS["base"]: 1000.0, IDS["previous"]: 1000.0})
    new = evaluated(repo, NEXT, fake, "base", "previous")
    assert any(
        a["variant"] == "+Accelerate" and a["image"] == "this" and a["median"] for a in new.entry["arms"]
    )
    records.write(
        replace(COMPLETE, ref=NEXT, evaluation=new.entry), records.default_path(repo, *NEXT.split(":"))
    )
    result = run(repo, "diff", REF, NEXT)
    assert result.exit_code == 0, result.stderr
    lines = [x for x in result.stdout.splitlines() if x.startswith("evaluation")]
    assert any("plain" in x for x in lines), result.stdout  # shown today
    assert any("+Accelerate" in x for x in lines), result.stdout


# --- the servers settled all at once --------------------------------------------------------------


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in the main thread, as the command line has it."""
    saved = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, saved)


def test_ctrl_c_while_the_servers_settle_stops_at_once(ctrl_c: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two arms whose first ask does not answer (a server compiling, or an image whose --ask hangs).
    # Ctrl-C 0.3 s into the settling: the old, one-after-another settling asked in the main thread,
    # whose wait a signal interrupts, so the stage stopped at once and removed its containers. Now
    # the main thread waits in `done.result()`, the KeyboardInterrupt is raised there, and the
    # `with ThreadPoolExecutor` block's exit (shutdown(wait=True)) waits for every settling ask to
    # end first: up to the run's timeout and ASK_GRACE (here 3 s; in a release the rest of the
    # stage's budget, 600 s by default), the servers running all the while.
    monkeypatch.setattr(served, "ASK_GRACE", 0.2)
    engine = FakeEngine(answers=[(HANGS, b"", b"")] * 2 + [(0, ANSWER, b"")])
    main = threading.main_thread().ident
    assert main is not None
    timer = threading.Timer(0.3, signal.pthread_kill, args=(main, signal.SIGINT))
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt), Served(engine) as runner:  # noqa: PT012
        for n in range(2):
            runner.prepare(f"img:{n}", ["xpu-bench"], env={}, purpose="evaluate", limits=LIMITS)
        timer.start()
        runner.run_bounded("img:0", ["xpu-bench"], env={}, purpose="evaluate", limits=LIMITS, timeout=3)
    stopped = time.monotonic() - began
    timer.cancel()
    assert len(engine.removed) == 2
    assert stopped < 1.5, f"Ctrl-C took {stopped:.1f} s to stop the stage"


class OneBroken(FakeEngine):
    """img:0's server answers its first ask, then the engine fails to say how the ask ended (an
    error the runner does not take for the engine's answer: raised, as from a run); img:1's
    first ask never answers nor ends."""

    def _image_of(self, exec_id: str) -> str:
        name = self.execs[int(exec_id) - 1][0]
        return str(next(m["image"] for m in self.created if m["name"] == name))

    def exec_start(
        self, exec_id: str, stream: bool, demux: bool
    ) -> Iterator[tuple[bytes | None, bytes | None]]:
        if self._image_of(exec_id) == "img:1":
            time.sleep(3600)
        self.codes[exec_id] = 0
        yield ANSWER, None

    def exec_inspect(self, exec_id: str) -> dict[str, int]:
        if self._image_of(exec_id) == "img:0":
            msg = "the engine broke off"
            raise RuntimeError(msg)
        return super().exec_inspect(exec_id)


def test_an_error_in_one_servers_settling_ask_is_raised_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The first server's settling ask raises at once; the second's hangs. One after another
    # (before), the error was raised at once. Now `done.result()` raises it, but the `with
    # ThreadPoolExecutor` block's exit first waits for every other settling ask: the error (and the
    # stage's end, and the removal of its containers) waits up to the run's timeout and
    # ASK_GRACE (here 3 s; in a release the rest of the budget), the other servers running on.
    monkeypatch.setattr(served, "ASK_GRACE", 0.2)
    engine = OneBroken()
    began = time.monotonic()
    with pytest.raises(RuntimeError, match="the engine broke off"), Served(engine) as runner:  # noqa: PT012
        for n in range(2):
            runner.prepare(f"img:{n}", ["xpu-bench"], env={}, purpose="evaluate", limits=LIMITS)
        runner.run_bounded("img:0", ["xpu-bench"], env={}, purpose="evaluate", limits=LIMITS, timeout=3)
    took = time.monotonic() - began
    assert len(engine.removed) == 2
    assert took < 1.5, f"the error was raised after {took:.1f} s"
