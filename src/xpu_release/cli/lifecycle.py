"""Commands that steer a release line after a release: withdraw, reinstate, promote."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .app import State, _emit_json, cli, json_option, pass_state, ref_argument
from .groups import Login, with_login
from .live import line_sink
from .output import info

if TYPE_CHECKING:
    from ..manifest import ImageSpec, Repo
    from ..manifest.support import Standing
    from ..release.model.serving import StatusRow
    from ..release.steering.withdraw import Action, Report

record_option = click.option(
    "--record",
    "record_file",
    type=click.Path(dir_okay=False),
    help="The release record (default out/releases/NAME/VERSION.json): its digest, and where the "
    "result is written.",
)


@cli.command()
@ref_argument()
@click.option(
    "--reason", required=True, help="Why, in one line: shown by status, verify, list and the next notes."
)
@record_option
@json_option()
@with_login
@pass_state
def withdraw(
    state: State, ref: str, reason: str, record_file: str | None, as_json: bool, login: Login
) -> None:
    """Withdraw a published NAME:VERSION: a withdrawal notice (the reason, when, who) is attached
    to it by digest at every endpoint, then every floating tag that serves it moves back to the
    newest release of the line that is not withdrawn. The version tag stays (pinned users are
    not broken); nothing is deleted. Safe to rerun and to interrupt: a rerun finishes.

    \b
    Examples:
      xpu-release withdraw training-cpu-pytorch:25.04 --reason "ray 2.44 crashes on start"
      xpu-release withdraw training-cpu-pytorch:25.04 --reason "…" --json
    """
    _steer(state, ref, "withdraw", reason, record_file, as_json, login)


@cli.command()
@ref_argument()
@record_option
@json_option()
@with_login
@pass_state
def reinstate(state: State, ref: str, record_file: str | None, as_json: bool, login: Login) -> None:
    """Undo a withdrawal of NAME:VERSION: a reinstatement notice naming each withdrawal in force
    is attached at every endpoint, then the floating tags come back to it where it is the newest
    release of the line (never backwards over a release published since). Safe to rerun.

    \b
    Examples:
      xpu-release reinstate training-cpu-pytorch:25.04
    """
    _steer(state, ref, "reinstate", "", record_file, as_json, login)


@cli.command()
@ref_argument()
@click.option(
    "--from",
    "source",
    required=True,
    type=click.Path(dir_okay=False),
    metavar="REGISTRIES_FILE",
    help="The registries file of the channel the release was published to (e.g. staging.yaml).",
)
@record_option
@json_option()
@with_login
@pass_state
def promote(
    state: State, ref: str, source: str, record_file: str | None, as_json: bool, login: Login
) -> None:
    """Promote a released NAME:VERSION from one channel to another: copy it by digest, with every
    document that refers to it (SBOM, provenance, VEX, lifecycle, cosign's layouts), from the
    endpoints of the registries file --from (staging) to those of the current one (production),
    write the version tags once every endpoint holds it, verify, then move the floating tags.
    No rebuild, no engine. Refused, nothing copied: a withdrawn release (exit 16), a failed gate
    (exit 14), a target whose version tag holds another image (exit 9). A rerun resumes.

    \b
    Examples:
      xpu-release --registries production.yaml promote training-cpu-pytorch:25.03 --from staging.yaml
      xpu-release promote training-cpu-pytorch:25.03 --from staging.yaml --json
    """
    from ..manifest.registries import load_registries
    from ..oci.channel import VERIFYING
    from ..release.model import record as records
    from ..release.model.pool import EndpointPool
    from ..release.steering.promote import Recording, promote_recorded

    spec = state.repo.load_ref(ref)
    registries = state.registries()
    staging_registries = load_registries(state.root, source)
    creds = login.store(state.settings, registries, staging_registries)
    path = Path(record_file) if record_file else records.default_path(state.root, spec.image, spec.version)
    into = Recording(path, state.root, state.registries_option or "registries.yaml", source)
    staging = EndpointPool(spec, staging_registries, creds, VERIFYING)
    target = EndpointPool(spec, registries, creds, on_line=(live := line_sink()))
    done = promote_recorded(state.repo, staging, target, into, spool=state.settings.cache, on_line=live)
    live.close()
    if as_json:
        copies = [
            {
                "target": c.target,
                "referrers": c.referrers,
                "kinds": c.kinds,
                "att": c.att,
                "blobs_copied": c.blobs_copied,
                "blobs_skipped": c.blobs_skipped,
            }
            for c in done.copies
        ]
        _emit_json({"ref": done.ref, "digest": done.digest, "source": done.source, "tagged": done.tagged,
                    "floating_moved": list(done.floating), "attachments": done.attachments, "copies": copies,
                    "record": str(path)})  # fmt: skip
        return
    click.echo(f"{done.ref} ({done.digest}) promoted from {source}: verified at {len(done.tagged)} endpoints")
    for c in done.copies:
        click.echo(f"  {c.target:<40} {len(c.referrers)} referrers, {c.blobs_copied} blobs copied, "
                   f"{c.blobs_skipped} present")  # fmt: skip
    for moved in done.floating:
        click.echo(f"  moved {moved}")
    info(f"record: {path}")


def _steer(
    state: State, ref: str, action: Action, reason: str, record_file: str | None, as_json: bool, login: Login
) -> None:
    from ..errors import endpoints_failed
    from ..oci.channel import VERIFYING
    from ..release.model import record as records
    from ..release.model.pool import EndpointPool
    from ..release.steering.withdraw import check_reason, steer

    spec = state.repo.load_ref(ref)
    text = check_reason(reason) if action == "withdraw" else ""
    registries = state.registries()
    creds = login.store(state.settings, registries)
    path = Path(record_file) if record_file else records.default_path(state.root, spec.image, spec.version)
    # A question and idempotent notices: a rerun is cheap, so fewer retries than a publish.
    pool = EndpointPool(spec, registries, creds, VERIFYING, on_line=(live := line_sink()))
    report = steer(state.repo, pool, action, path, by=state.builder, reason=text, on_line=live)
    live.close()
    if report.record_written:
        info(f"record: {path}")
    if as_json:
        _emit_json(_report_json(report))
    else:
        _print_report(report)
    if not report.ok:
        lines = [
            f"{spec.ref}: not every endpoint is done; rerun `xpu-release {action} {spec.ref}` to finish:"
        ]
        lines += [f"  {endpoint:<22} {why}" for endpoint, why in report.failed]
        raise endpoints_failed("\n".join(lines), report.errors, len(pool.plan.targets))


def _report_json(report: Report) -> dict[str, Any]:
    return {
        "ref": report.ref, "digest": report.digest, "action": report.action, "ok": report.ok,
        "withdrawn": [n.to_json() for n in report.withdrawn],
        "made": report.made.to_json() if report.made else None,
        "attached": report.attached, "absent": report.absent,
        "failed": [{"endpoint": e, "error": why} for e, why in report.failed],
        "tags": [{"endpoint": m.endpoint, "ref": m.ref, "was": m.was, "now": m.now, "version": m.version}
                 for m in report.tags],
    }  # fmt: skip


def _print_report(report: Report) -> None:
    state = "; ".join(n.words() for n in report.withdrawn) or "not withdrawn"
    click.echo(f"{report.ref} ({report.digest}): {state}")
    if report.attached:
        click.echo(f"  notices attached at {', '.join(report.attached)}")
    for name in report.absent:
        click.echo(f"  {name:<22} does not hold it: nothing to do there")
    for m in report.tags:
        if m.moved:
            click.echo(f"  {m.endpoint:<22} {m.ref} → {m.version}")
        elif m.version is None:
            click.echo(
                f"  {m.endpoint:<22} {m.ref} stays on it: no other release of the line is served there"
            )


def standing(spec: ImageSpec) -> Standing:
    """Where the release stands today (supported, ending soon, end of life)."""
    from datetime import date

    from ..manifest.support import state

    return state(spec, date.today())


def withdrawn_words(rows: list[StatusRow]) -> list[str]:
    """ "; withdrawn …" once per distinct withdrawal in force at an endpoint, with where."""
    found: dict[str, list[str]] = {}
    for r in rows:
        if r.withdrawn is not None:
            found.setdefault(r.withdrawn.words(), []).append(r.endpoint)
    every = {r.endpoint for r in rows}
    return [f"; {words}" + ("" if set(where) == every else f" (at {', '.join(where)})")
            for words, where in found.items()]  # fmt: skip


def withdrawn_on_record(repo: Repo, spec: ImageSpec) -> dict[str, Any] | str | None:
    """What the release record says of a withdrawal (None: none, or no record to say); a
    record that cannot be read says why (it is not "not withdrawn": ``status`` reads the
    registries)."""
    from ..errors import ReleaseError
    from ..release.model import record as records

    try:
        record = records.read_optional(records.default_path(repo.root, spec.image, spec.version))
    except ReleaseError as exc:
        return exc.message
    return record.withdrawn if record is not None else None
