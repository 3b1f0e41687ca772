"""``watch --release``: every published release that needs a patch gets one, parents first: it is
checked again (its base may just have been patched), ``patch`` prepares the next patch (or a
patch prepared earlier and not published is taken up again), and the release pipeline releases
it. One summary says what was patched, why, and the digests published; then every release is
checked once more, and the command ends as ``watch`` would (a second run right after has
nothing to do).

The two steps are handed in (``Steps``): the command line gives ``patch`` and the release
pipeline as they run on their own, tests give fakes. A release that fails stops the run: what
was released before it stays released (each release is whole or not published), the summary
says where it stopped, and the error is raised.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ...errors import NeedsPatch, OutputError, ReleaseError
from .watch import Watcher, watch_all
from .watched import Watched, exit_code

Outcome = Literal["released", "resumed", "nothing to fix", "waits for its base", "up to date now", "failed"]


class Steps(Protocol):
    def patch(self, ref: str, watched: Watched) -> tuple[str | None, tuple[str, ...]]:
        """Write the next patch of ``ref``: its ref (None: nothing to fix) and what stays open
        or must come first."""

    def release(self, ref: str) -> str:
        """Release ``ref`` (build, test, gate, publish, verify); its published digest."""


@dataclass(frozen=True, kw_only=True)
class Step:
    ref: str  # the release that needed a patch
    outcome: Outcome
    why: tuple[str, ...]  # its reasons
    patch: str | None = None  # the patch released
    digest: str | None = None  # its published digest
    notes: tuple[str, ...] = ()  # what stays open, what must come first, or the error

    def to_json(self) -> dict[str, Any]:
        return {"ref": self.ref, "outcome": self.outcome, "why": list(self.why), "patch": self.patch,
                "digest": self.digest, "notes": list(self.notes)}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Summary:
    steps: tuple[Step, ...]
    final: tuple[Watched, ...] = ()  # every release, checked again after the releases
    error: ReleaseError | None = field(default=None, compare=False)
    unwritten: tuple[tuple[str, str], ...] = ()  # (ref, why) whose first answer no history took

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return self.error.exit_code
        code = exit_code(list(self.final))
        return OutputError.exit_code if self.unwritten and code in (0, NeedsPatch.exit_code) else code

    def to_json(self) -> dict[str, Any]:
        return {"patched": [s.to_json() for s in self.steps], "releases": [w.to_json() for w in self.final],
                "history_errors": [{"ref": r, "message": m} for r, m in self.unwritten],
                "exit_code": self.exit_code}  # fmt: skip


def due(watcher: Watcher, results: list[Watched], order: Callable[[list[str]], list[list[str]]]) -> list[str]:
    """The releases that need a patch, and the base releases they need one *through*, parents
    first (``manifest/order.py``'s waves)."""
    needing: set[str] = set()
    stack = [w for w in results if w.state == "needs a patch"]
    while stack:
        w = stack.pop()
        if w.ref not in needing:
            needing.add(w.ref)
            stack += [watcher.watch(r.moves_to) for r in w.reasons if r.kind == "through-base" and r.moves_to]
    return [r for wave in order(sorted(needing)) for r in wave]


def run(watcher: Watcher, refs: list[str], order: Callable[[list[str]], list[list[str]]],
        steps: Steps) -> Summary:  # fmt: skip
    """Patch and release what needs it, parents first; the summary, then every release again."""
    first = watch_all(watcher, refs, order)
    unwritten = tuple((w.ref, w.history_error) for w in first if w.history_error)
    todo = due(watcher, first, order)
    watcher.keep_history = False  # one history entry per release and run: the first answer
    done: list[Step] = []
    error: ReleaseError | None = None
    for ref in todo:
        watcher.forget_all()  # a base released just now changes what its children need
        now = watcher.watch(ref)
        why = tuple(r.text for r in now.reasons)
        if now.state != "needs a patch":
            done.append(Step(ref=ref, outcome="up to date now", why=why))
            continue
        try:
            outcome: Outcome = "resumed" if now.pending else "released"
            patch, notes = (now.pending, ()) if now.pending else steps.patch(ref, now)
            if patch is None:
                waits = any(r.kind == "through-base" for r in now.reasons)
                done.append(Step(ref=ref, outcome="waits for its base" if waits else "nothing to fix",
                                 why=why, notes=notes))  # fmt: skip
                continue
            digest = steps.release(patch)
        except ReleaseError as exc:
            done.append(Step(ref=ref, outcome="failed", why=why, notes=(exc.message.splitlines()[0],)))
            error = exc
            break
        done.append(Step(ref=ref, outcome=outcome, why=why, patch=patch, digest=digest, notes=notes))
    watcher.forget_all()
    final = tuple(watch_all(watcher, [*refs, *(s.patch for s in done if s.patch)], order))
    return Summary(steps=tuple(done), final=final, error=error, unwritten=unwritten)
