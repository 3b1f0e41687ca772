"""Commands that keep published releases safe after they ship: watch (re-scan what is published,
its base, the SLA; with --release, patch and release what needs it) and patch (prepare the next
patch release of one)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from ..errors import ConfigError
from .app import State, _emit_json, cli, json_option, pass_state, ref_argument
from .groups import Checks, Login, Push, advisories_option, grouped, signing_key_option, with_login
from .live import line_sink
from .output import info, warn


@dataclass(frozen=True)
class Reading:
    """What a watch reads: the advisories, the day it counts SLA days to (``--today``), and how
    many requests it makes at once (``--jobs``)."""

    advisories: tuple[str, ...] = ()
    today: str | None = None
    jobs: int | None = None


_today = click.option(
    "--today",
    metavar="DATE",
    help="A what-if: count SLA days and review dates up to DATE (default: today, UTC). A DATE other "
    "than today adds nothing to the re-scan history.",
)
_jobs = click.option("--jobs", type=click.IntRange(0, 16), default=None, metavar="N",
                     help="Requests to the public registry at once, reading the next releases' SBOMs ahead "
                     "of the one scanned [default: 2; 0: one request at a time].")  # fmt: skip


def clock() -> datetime:
    """Now, in UTC: the time a re-scan history entry is named by, and (without ``--today``) the
    day SLA days are counted to. One function, so that tests can say which day it is."""
    return datetime.now(UTC)


@contextmanager
def _watcher(state: State, reading: Reading, login: Login, *, history: bool = True) -> Iterator[Any]:
    """One run's watcher: the advisories (required), the registries, credentials, today. It adds
    to the re-scan history (``history``) only on the day it runs: ``--today`` another day is a
    what-if, whose first-seen days are not days a scan saw anything."""
    from ..evidence.osv import Advisories
    from ..release.watching.published import Reader
    from ..release.watching.watch import Watcher

    gate = Checks(advisories=reading.advisories).gate(state.settings, reading.today)
    if not gate.advisories:
        msg = "no advisories: give --advisories PATH or set XPU_RELEASE_ADVISORIES (OSV records, offline)"
        raise ConfigError(msg)
    registries = state.registries()
    reader = Reader(registries, login.store(state.settings, registries))
    found = Advisories([Path(p) for p in gate.advisories], state.settings.cache)
    now = clock()
    day = gate.today or now.date()
    if history and day != now.date():
        info(f"--today {day} is not today ({now.date()}): a what-if; nothing is added to the re-scan history")
    if not found.counts.records:
        where = ", ".join(gate.advisories)
        warn(f"0 advisories read from {where} ({_unused(found.counts)}): every release is checked against "
             "nothing; fetch the advisories again (an empty folder is a failed fetch)")  # fmt: skip
    keep = history and day == now.date()
    try:
        yield Watcher(
            state.repo, reader, found, today=day, now=now, keep_history=keep, read_ahead=reading.jobs
        )
    finally:
        found.close()


def _unused(counts: Any) -> str:
    """What reading the advisories met instead of records, in words."""
    met = (("withdrawn", counts.withdrawn), ("of another schema", counts.other_schema),
           ("unreadable", counts.unreadable), ("skipped", counts.skipped))  # fmt: skip
    said = [f"{n} {what}" for what, n in met if n]
    return ", ".join(said) or "no OSV record there"


def _targets(state: State, refs: tuple[str, ...]) -> list[str]:
    """The releases named (each must have a manifest: a clear error first), else every one."""
    if not refs:
        return list(state.repo.refs())
    for ref in refs:
        state.repo.load_ref(ref)
    return list(dict.fromkeys(refs))


def _order(state: State) -> Any:
    from ..manifest.order import build_order

    return lambda refs: build_order(state.repo, refs)


def _say(w: Any) -> None:
    """One release as ``watch`` answers for it."""
    from ..release.watching.watched import UNCOMMITTED

    sla = " (out of SLA)" if w.sla == "out" and w.state == "needs a patch" else ""
    by = f" by {w.superseded_by}" if w.superseded_by else ""
    eol = f" since {w.end_of_life}: not watched (past its support date)" if w.end_of_life else ""
    click.echo(f"{w.ref}  {w.state}{by}{eol}{sla}")
    if w.uncommitted:
        click.echo(f"  {w.superseded_by} is published but its manifest is not in this checkout: commit the "
                   f"files the run that released it wrote ({UNCOMMITTED}); until then it is not "
                   "watched")  # fmt: skip
    for r in w.reasons:
        click.echo(f"  {r.text}")
    for o in w.open:
        fix = f"fixed in {o.fix}" if o.fix else "no fix yet"
        clock = o.clock
        due = (
            f"SLA {clock.days} d from {clock.since} ({clock.source}): due {clock.due}, {clock.state}"
            if clock.due
            else "no SLA"
        )
        click.echo(f"  open {o.finding.level:<8} {o.finding.ids[0]} in {o.finding.package.name} "
                   f"{o.finding.package.version}: {fix}; {due}")  # fmt: skip
    if w.excepted:
        click.echo(f"  {w.excepted} more excepted by the image's VEX")
    if w.sboms > 1:
        click.echo(f"  {w.sboms} SBOMs are attached to it: their packages were scanned together")
    if w.pending:
        click.echo(f"  {w.pending} is prepared and not published: release it")
    for u in w.unchecked:
        click.echo(f"  could not check its {u.what}: {u.message}")
    if w.history_error:
        click.echo(f"  not added to its re-scan history: {w.history_error}")


def _tally(results: list[Any]) -> str:
    counts: dict[str, int] = {}
    for w in results:
        key = "superseded by a patch not committed here" if w.uncommitted else w.state
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in counts.items())


@cli.command()
@ref_argument("refs", nargs=-1)
@grouped("reading", Reading, advisories_option, _today, _jobs)
@click.option(
    "--release",
    "release_",
    is_flag=True,
    help="Patch and release every published release that needs it, parents first (patch, then the "
    "release pipeline), and print one summary; a second run right after does nothing.",
)
@json_option("Every release with every field (reasons, findings, SLA, what could not be checked) as JSON.")
@signing_key_option
@with_login
@pass_state
def watch(state: State, refs: tuple[str, ...], reading: Reading, release_: bool, as_json: bool,
          signing_key: str | None, login: Login) -> None:  # fmt: skip
    """Is every published release (or NAME:VERSION…) still safe? Without the engine and without
    rebuilding: its SBOM as published, scanned against today's advisories and the image's VEX;
    its base (moved tag, a patched base release); each open finding's fix and SLA
    (security.sla_days). A release past its support date (support:) is end of life: said, and
    not checked. Exit 0: nothing to do; 15: a release needs a patch, is out of SLA or is
    superseded by a published patch whose manifest is not committed; a release that could not
    be checked ends in its own error's code. Each answer is added to the
    release's re-scan history (out/releases/<name>/<version>.watch/). Without --release it ends
    with the plan: what --release would patch and release, parents first.

    \b
    Examples:
      xpu-release watch --advisories osv/
      xpu-release watch training-cpu-pytorch:25.03 --json
      xpu-release watch --release --advisories osv/
    """
    from ..release.watching.autopatch import due
    from ..release.watching.watch import watch_all
    from ..release.watching.watched import exit_code

    targets = _targets(state, refs)
    with _watcher(state, reading, login) as watcher:
        if release_:
            code = _release_all(state, watcher, targets, reading, signing_key, as_json)
        else:
            results = watch_all(watcher, targets, _order(state))
            code = exit_code(results)
            plan = due(watcher, results, _order(state))  # what --release would patch, parents first
            if as_json:
                _emit_json({"releases": [w.to_json() for w in results], "plan": plan, "exit_code": code,
                            "advisories": list(watcher.advisories.sources),
                            "records": vars(watcher.advisories.counts),
                            "what_if": not watcher.keep_history})  # fmt: skip
            else:
                for w in results:
                    _say(w)
                if plan:
                    click.echo(f"to patch and release, parents first (watch --release): {', '.join(plan)}")
            for w in results:
                for u in w.unchecked:
                    click.echo(f"{w.ref}: could not check its {u.what}: {u.message}", err=True)
                if w.history_error:
                    click.echo(f"{w.ref}: not added to its re-scan history: {w.history_error}", err=True)
            read = watcher.advisories.counts.records
            info(f"watched {len(results)} releases against {read} advisories: {_tally(results)}")
    if code:
        raise click.exceptions.Exit(code)


def _release_all(state: State, watcher: Any, targets: list[str], reading: Reading, signing_key: str | None,
                 as_json: bool) -> int:  # fmt: skip
    from ..release.watching.autopatch import run

    gate = Checks(advisories=reading.advisories).gate(state.settings, reading.today)
    steps = _Steps(state, watcher, gate, Push(signing_key=signing_key).signer(state.settings))
    summary = run(watcher, targets, _order(state), steps)
    if as_json:
        _emit_json(summary.to_json())
    else:
        for s in summary.steps:
            made = f": {s.patch} {s.digest}" if s.patch else ""
            click.echo(f"{s.ref}  {s.outcome}{made}")
            for why in (*s.why, *s.notes):
                click.echo(f"  {why}")
        if not summary.steps:
            click.echo("nothing needs a patch; each release, as checked after:")
        for w in summary.final:
            _say(w)
    for ref, why in summary.unwritten:
        click.echo(f"{ref}: not added to its re-scan history: {why}", err=True)
    if summary.error is not None:
        raise summary.error
    return summary.exit_code


class _Steps:
    """``patch`` and the release pipeline, as ``watch --release`` runs them."""

    def __init__(self, state: State, watcher: Any, gate: Any, signer: Any) -> None:
        self.state = state
        self.watcher = watcher
        self.gate = gate
        self.signer = signer

    def patch(self, ref: str, watched: Any) -> tuple[str | None, tuple[str, ...]]:
        prepared = _prepare(self.state, self.watcher, ref, watched)
        open_ = tuple(
            f"does not fix {u.id} in {u.package} {u.installed}: {u.why}" for u in prepared.patch.open
        )
        if not prepared.changes:
            return None, (*prepared.blocked, *open_)
        if not _write(self.state, prepared):
            return None, (MOVED_BACK, *prepared.blocked, *open_)
        return prepared.ref, (*prepared.blocked, *open_)

    def release(self, ref: str) -> str:
        from ..release.publishing.publish import Options
        from ..release.run.pipeline import Choices, Release, Reporter

        registries = self.state.registries()
        creds = self.watcher.reader.credentials  # the login watch was given: the same endpoints
        options = Options(signer=self.signer, codec=Push().codec(self.state.settings))
        reporter = Reporter(live := line_sink(), ci=self.state.settings.ci)
        try:
            chosen = Choices(builder=self.state.builder, gate=self.gate)
            summary = Release(self.state.repo, ref, registries, creds, options, reporter, chosen).run()
        finally:
            live.close()
        return str((summary.record or {}).get("digest") or "")


MOVED_BACK = "its base tag moved back to the digest its lock pins before the patch's lock was made"


def _prepare(state: State, watcher: Any, ref: str, watched: Any) -> Any:
    from ..image.index import offers, versions
    from ..image.lock import load_lock
    from ..release.watching.patch import prepare

    spec = state.repo.load_ref(ref)
    lock = load_lock(state.root, spec, current=False)
    return prepare(state.repo, spec, watched, watcher.advisories, lock, offers, versions)


def _write(state: State, prepared: Any) -> tuple[Path, ...]:
    from ..image.engine import Engine
    from ..image.relock import relock
    from ..release.watching.patch import write

    registries = state.registries()

    def lock_with(spec: Any) -> Any:
        return relock(state.root, spec, registries, state.credentials(), engine=Engine.connect,
                      on_line=line_sink()).lock  # fmt: skip

    return write(state.repo, prepared, lock_with, registries)


@cli.command()
@ref_argument()
@grouped("reading", Reading, advisories_option, _today)
@json_option('The new ref and why, as JSON: {"ref": …, "reasons": […], "fixes": […], "open": […]}.')
@with_login
@pass_state
def patch(state: State, ref: str, reading: Reading, as_json: bool, login: Login) -> None:
    """Prepare the next patch release of the published NAME:VERSION (25.03 → 25.03.1, 2.13.0 →
    2.13.0.1): a manifest that extends it, each package with open findings bumped to the smallest
    version that fixes them and that the package index offers, the base re-pinned where it moved,
    and release.patch saying why; then its lock and Dockerfile. Prints the new ref. Nothing to
    fix: it says so and writes nothing. Then release it as any version.

    \b
    Examples:
      xpu-release patch training-cpu-pytorch:25.03 --advisories osv/
      xpu-release patch pytorch-cpu-sdk:2.13.0 --json
    """
    from ..release.watching.patch import patchable

    state.repo.load_ref(ref)
    with _watcher(state, reading, login, history=False) as watcher:
        watched = watcher.watch(ref)
        refused = patchable(watched)
        if refused is not None:
            _patched(as_json, None, watched, refused)
            return
        prepared = _prepare(state, watcher, ref, watched)
        if not prepared.changes:
            why = (
                "; ".join(prepared.blocked)
                or "no open finding has a fix the index offers, and the base has not moved"
            )
            _patched(as_json, prepared, watched, f"nothing to fix in {ref}: {why}; nothing was written")
            return
        written = _write(state, prepared)
        if not written:
            _patched(as_json, None, watched, f"nothing to fix in {ref}: {MOVED_BACK}; nothing was written")
            return
    for path in written:
        info(f"wrote {state.repo.rel(path)}")
    _patched(as_json, prepared, watched, "", ref=prepared.ref)


def _patched(as_json: bool, prepared: Any, watched: Any, message: str, *, ref: str | None = None) -> None:
    patch = prepared.patch.to_dict() if prepared is not None else {"fixes": [], "base": None, "open": []}
    if as_json:
        _emit_json({"ref": ref, "of": watched.ref, "reasons": [r.to_json() for r in watched.reasons], **patch,
                    "blocked": list(prepared.blocked) if prepared else [], "message": message})  # fmt: skip
    elif ref:
        click.echo(ref)
    if message:
        info(message)
    for f in patch["fixes"]:
        info(f"fixes {f['id']} in {f['package']}: {f['old']} → {f['new']}")
    if patch["base"]:
        old, new = patch["base"]["old"], patch["base"]["new"]
        info(f"moves its base {old['ref']} → {new['ref']} ({old['digest'][:19]}… → {new['digest'][:19]}…)")
    for u in patch["open"]:
        info(f"does not fix {u['id']} in {u['package']} {u['installed']}: {u['why']}")
