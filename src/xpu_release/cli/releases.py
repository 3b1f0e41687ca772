"""Commands that make and describe whole releases: notes, release (alias build-release), doctor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .app import State, _emit_json, cli, json_option, pass_state, ref_argument
from .groups import Chain, Checks, Login, Push, checks_options, grouped, push_options, with_login
from .housekeeping import cache_limit, cap_cache
from .lifecycle import standing
from .live import line_sink
from .output import info, write_output
from .output import status as status_word


@cli.command()
@ref_argument()
@click.option(
    "--lang",
    type=click.Choice(["zh", "en"]),
    default="zh",
    show_default=True,
    help="The language of the notes.",
)
@click.option(
    "--record",
    "record_file",
    type=click.Path(dir_okay=False),
    help="A release record: adds the published refs and digests.",
)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write to FILE ('-': stdout).")
@pass_state
def notes(state: State, ref: str, lang: str, record_file: str | None, output: str | None) -> None:
    """Release notes of NAME:VERSION in Markdown, from its manifest (and its release record).

    \b
    Examples:
      xpu-release notes training-xpu-pytorch:25.03 --lang zh > notes.zh.md
      xpu-release notes training-xpu-pytorch:25.03 --lang en -o out/notes.en.md
    """
    from ..release.model import record as records
    from ..release.run.notes import render_notes

    spec = state.repo.load_ref(ref)
    path = Path(record_file) if record_file else None
    # This release's record (another release's is refused, exit 3; none there: exit 11).
    record = (records.of_release(path, spec.ref) or records.read(path)) if path else None
    result = render_notes(state.repo, spec, state.registries(), lang, record)
    if write_output(output, result.text, what="notes"):
        info(f"wrote {output}")


# --- release ------------------------------------------------------------------------------


@cli.command()
@grouped(
    "chain",
    Chain,
    ref_argument(),
    click.option(
        "--with-bases",
        is_flag=True,
        help="First release every release of ours it builds on (its SDK base, parents first); a base "
        "already published is verified, not published again.",
    ),
)
@click.option("--dry-run", is_flag=True, help="Show every stage's plan; change nothing.")
@json_option("The summary as JSON on stdout.")
@checks_options
@push_options
@with_login
@pass_state
def release(state: State, chain: Chain, dry_run: bool, as_json: bool, checks: Checks, push: Push,
            login: Login) -> None:  # fmt: skip
    """Validate, render check, lock check, build, smoke test, evaluate, scan, publish, verify, notes and
    record.

    \b
    Examples:
      xpu-release release training-cpu-pytorch:25.03 --dry-run
      xpu-release release training-cpu-pytorch:25.03 --with-bases
      xpu-release release training-cpu-pytorch:25.03 --json > summary.json
      xpu-release release training-cpu-pytorch:25.03 --advisories osv/
    """
    from ..errors import ReleaseError
    from ..release.publishing.publish import Options
    from ..release.run.pipeline import Choices, Release, Reporter

    # A dry run reads the login and the key too: it fails as the real run would.
    creds = login.store(state.settings, state.registries())
    signer = push.signer(state.settings)
    codec = push.codec(state.settings)
    limit = cache_limit(state)
    gate = checks.gate(state.settings)
    no_evaluate = checks.skip_evaluation()
    summaries = []
    for current in chain.refs(state.repo):
        options = Options(allow_overwrite=push.allow_overwrite, signer=signer, codec=codec)
        reporter = Reporter(live := line_sink(), ci=state.settings.ci)
        chosen = Choices(builder=state.builder, dry_run=dry_run, gate=gate, no_evaluate=no_evaluate)
        run = Release(state.repo, current, state.registries(), creds, options, reporter, chosen)
        try:
            summary = run.run()
        except ReleaseError:
            live.close()
            if as_json and run.failed is not None:
                _emit_json(run.failure_summary())  # always a summary on stdout, also on failure
            raise
        live.close()
        summaries.append(summary)
    if not dry_run:
        cap_cache(state, limit)
    if as_json:
        _emit_json(summaries[-1].to_json() if len(summaries) == 1 else [s.to_json() for s in summaries])
        return
    for summary in summaries:
        _print_summary(summary)


def _print_summary(summary: Any) -> None:
    click.echo(f"{summary.ref}{' (dry run: nothing changed)' if summary.dry_run else ''}")
    for s in summary.stages:
        click.echo(f"  {s.name:<9} {status_word(s.status)} {s.seconds:7.1f} s  {s.detail}")
    for e in summary.record["endpoints"] if summary.record else ():
        click.echo(f"  {e['endpoint']:<22} {e['version_ref']}  {e['digest']}")
    for path in summary.notes:
        click.echo(f"  notes: {path}")


def _alias(command: click.Command, of: str) -> click.Command:
    import copy

    alias = copy.copy(command)
    alias.short_help = f"Alias of `{of}`."
    alias.help = f"Alias of `{of}`: the same command, options and exit codes.\n\n{command.help or ''}"
    return alias


cli.add_command(_alias(release, "release"), "build-release")


@cli.command()
@ref_argument("refs", nargs=-1)
@json_option("Every check as JSON on stdout.")
@with_login
@pass_state
def doctor(state: State, refs: tuple[str, ...], as_json: bool, login: Login) -> None:
    """Check the whole setup read-only: manifests, locks, the engine, base images, the files
    builds fetch, every endpoint and its credentials; and say where each release's support
    stands (never a failure). Default: the newest release of each image.

    \b
    Examples:
      xpu-release doctor
      xpu-release doctor training-cpu-pytorch:25.03 --json
    """
    from ..errors import PreflightFailed, ReleaseError
    from ..image.lock import load_lock
    from ..manifest import parse_ref
    from ..release.run.preflight import (
        Check,
        artifact_checks,
        base_check,
        endpoint_check,
        engine_check,
        verdict,
        wheels_check,
    )

    repo = state.repo
    registries = state.registries()
    creds = login.store(state.settings, registries)
    targets = [parse_ref(r) for r in refs] or [(i, repo.versions(i)[-1]) for i in repo.images()]
    checks: list[Check] = [engine_check()]
    hosts: set[str] = set()
    for image, version in targets:
        ref = f"{image}:{version}"
        try:
            spec = repo.load(image, version)
        except ReleaseError as exc:
            checks.append(Check(what=f"{ref} manifest", ok=False,
                                detail=exc.message.splitlines()[0], exit_code=exc.exit_code))  # fmt: skip
            continue
        # Not a failure whatever it says: an end-of-life release is still served, and says so.
        checks.append(Check(what=f"{ref} support", ok=True, detail=standing(spec).words()))
        own = artifact_checks(spec)
        try:
            lock = load_lock(repo.root, spec)
        except ReleaseError as exc:
            checks.append(Check(what=f"{ref} lock", ok=False,
                                detail=exc.message.splitlines()[0], exit_code=exc.exit_code))  # fmt: skip
        else:
            checks.append(Check(what=f"{ref} lock", ok=True, detail=f"{len(lock.layers)} layers locked"))
            own = [base_check(spec, lock, registries, creds), wheels_check(lock), *own]
        for c in own:
            checks.append(Check(what=f"{ref} {c.what}", ok=c.ok, detail=c.detail, exit_code=c.exit_code))
        for ep in registries.publish_endpoints():
            if ep.host not in hosts:  # one check per host: the same credentials go to it
                hosts.add(ep.host)
                checks.append(endpoint_check(spec, ep, creds))
    if as_json:
        _emit_json([c.__dict__ for c in checks])
    else:
        for c in checks:
            click.echo(c.line())
    error = verdict(checks, context="a release of what failed would stop there")
    if error is not None:
        assert isinstance(error, PreflightFailed)
        raise error
