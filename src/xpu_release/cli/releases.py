"""Commands that publish and describe releases: publish, status, notes, release, from-tag, changed."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .app import (
    State,
    _credentials,
    _emit_json,
    _line_sink,
    _print_record,
    cli,
    json_option,
    newer_version,
    pass_state,
    print_plan,
    ref_argument,
    with_login,
    write_output,
)
from .output import info
from .output import status as status_word

# --- publish -----------------------------------------------------------------------------

signing_key_option = click.option(
    "--signing-key",
    type=click.Path(dir_okay=False),
    help="Sign the provenance with this PEM private key (Ed25519 or ECDSA P-256; also "
    "$XPU_RELEASE_SIGNING_KEY; an encrypted key's password from $XPU_RELEASE_SIGNING_KEY_PASSWORD).",
)


@cli.command()
@ref_argument()
@click.option("--dry-run", is_flag=True, help="Print the plan; touch nothing.")
@click.option("--allow-overwrite", is_flag=True, help="Replace a version tag that holds other content.")
@click.option("--record", "record_file", type=click.Path(dir_okay=False), help="Where to write the record.")
@click.option("--chunk-size", type=click.IntRange(min=1 << 20), help="Chunked blob uploads of this size.")
@click.option(
    "--engine-push",
    is_flag=True,
    help="Make the first push with `docker push` (for comparison; blobs then depend on the engine).",
)
@json_option()
@signing_key_option
@with_login
@pass_state
def publish(
    state: State,
    ref: str,
    dry_run: bool,
    allow_overwrite: bool,
    record_file: str | None,
    chunk_size: int | None,
    engine_push: bool,
    as_json: bool,
    signing_key: str | None,
    username: str | None,
    password_stdin: bool,
) -> None:
    """Publish the tested NAME:VERSION to the public registry and every VPC region, verified.

    \b
    Examples:
      xpu-release publish training-cpu-pytorch:25.03 --dry-run
      xpu-release publish training-cpu-pytorch:25.03 --signing-key key.pem
    """
    from ..errors import PublishError
    from ..release import record as records
    from ..release.plan import make_plan
    from ..release.publish import Options, failure_report
    from ..release.publish import publish as run_publish

    spec = state.repo.load_ref(ref)
    registries = state.registries()
    if dry_run:
        plan = make_plan(spec, registries, newer=newer_version(state.repo, spec.image, spec.version))
        if as_json:
            _emit_json({**plan.to_json(), "dry_run": True})
            return
        print_plan(plan, f"would publish {spec.ref} (dry run: nothing is touched)")
        return
    from ..evidence.attest import Documents
    from ..image.engine import Engine

    creds = _credentials(username, password_stdin, state.registries())
    options = Options(
        allow_overwrite=allow_overwrite,
        chunk_size=chunk_size,
        move_floating=state.repo.is_latest(spec.image, spec.version),
        engine_push=engine_push,
        signer=state.signer(signing_key),
    )
    engine = Engine.connect()
    documents = Documents(repo=state.repo, spec=spec, engine=engine, builder=state.builder)
    result = run_publish(spec, registries, engine, creds, options, live := _line_sink(), documents)
    live.close()
    path = Path(record_file) if record_file else records.default_path(state.root, spec.image, spec.version)
    written = records.keep(result, path)
    if as_json:
        _emit_json(result.to_json())
    else:
        _print_record(result)
        info(f"record: {written}")
        if written != path:
            info(f"(the record at {path} says more is done and is kept as it was)")
    if not result.complete:
        raise PublishError(failure_report(result))


@cli.command()
@ref_argument()
@click.option("--deep", is_flag=True, help="Download and hash every blob at every endpoint.")
@click.option(
    "--key",
    "key_file",
    type=click.Path(dir_okay=False),
    help="A PEM public key: the provenance at every endpoint must be signed by it (exit 7 if not).",
)
@click.option("--record", "record_file", type=click.Path(dir_okay=False), help="The record to compare with.")
@json_option()
@with_login
@pass_state
def verify(
    state: State,
    ref: str,
    deep: bool,
    key_file: str | None,
    record_file: str | None,
    as_json: bool,
    username: str | None,
    password_stdin: bool,
) -> None:
    """Check that every endpoint serves NAME:VERSION blob for blob (exit 7 naming what is wrong).

    Without --deep: the version tag names the recorded manifest and every blob exists with its
    size. With --deep: every blob is downloaded and hashed, at every endpoint.

    \b
    Examples:
      xpu-release verify training-cpu-pytorch:25.03 --deep
      xpu-release verify training-cpu-pytorch:25.03 --key key.pub
    """
    from dataclasses import asdict

    from ..errors import VerifyFailed
    from ..release import record as records
    from ..release.verify import verify as run_verify

    spec = state.repo.load_ref(ref)
    path = Path(record_file) if record_file else records.default_path(state.root, spec.image, spec.version)
    record = records.read_optional(path)
    creds = _credentials(username, password_stdin, state.registries())
    expected = record.digest if record else None
    attached = (record.attachments or None) if record else None
    from ..evidence.signing import load_verifier

    key = load_verifier(key_file) if key_file else None
    report = run_verify(spec, state.registries(), creds, expected, deep=deep, attachments=attached, key=key,
                        on_line=(live := _line_sink()))  # fmt: skip
    live.close()
    if as_json:
        _emit_json({**asdict(report), "ok": report.ok})
    elif report.ok:
        level = (
            f"deep: {report.bytes_hashed / 1e6:.0f} MB hashed"
            if deep
            else "shallow: every blob present, sizes match"
        )
        signed = f"; the provenance is signed by {key.keyid[:19]}" if key else ""
        click.echo(f"{spec.ref}: {report.endpoints} endpoints serve {report.digest}, "
                   f"{report.blobs_checked} blobs checked ({level}){signed}")  # fmt: skip
    if not report.ok:
        lines = [f"{spec.ref}: {len(report.findings)} problems:"]
        lines += [f"  {f.endpoint:<22} {f.what}: {f.problem}" for f in report.findings]
        raise VerifyFailed("\n".join(lines))


@cli.command()
@ref_argument()
@click.option("--record", "record_file", type=click.Path(dir_okay=False), help="The record to compare with.")
@click.option("--catalog", is_flag=True, help="Every tag of the repository, per endpoint, with its digest.")
@json_option()
@with_login
@pass_state
def status(
    state: State,
    ref: str,
    record_file: str | None,
    catalog: bool,
    as_json: bool,
    username: str | None,
    password_stdin: bool,
) -> None:
    """What every endpoint serves now for NAME:VERSION, against its release record.

    \b
    Examples:
      xpu-release status training-cpu-pytorch:25.03
      xpu-release status training-cpu-pytorch:25.03 --catalog --json
    """
    from ..errors import PublishError
    from ..release import record as records
    from ..release.serving import catalog as tag_catalog
    from ..release.serving import status as endpoint_status

    spec = state.repo.load_ref(ref)
    creds = _credentials(username, password_stdin, state.registries())
    if catalog:
        entries = tag_catalog(spec, state.registries(), creds)
        if as_json:
            _emit_json(
                {
                    "endpoints": {e.endpoint: dict(e.tags) for e in entries if e.error is None},
                    "errors": {
                        e.endpoint: {"error": e.error, "kind": e.error_kind} for e in entries if e.error
                    },
                }
            )
        else:
            for e in entries:
                click.echo(
                    e.endpoint
                    if e.error is None
                    else f"{e.endpoint}: {'AUTH' if e.error_kind == 'auth' else 'DOWN'} {e.error}"[:100]
                )
                for tag, digest in e.tags:
                    click.echo(f"  {tag:<16} {digest}")
        _raise_for_errors([(e.endpoint, e.error, e.error_kind) for e in entries])
        return
    path = Path(record_file) if record_file else records.default_path(state.root, spec.image, spec.version)
    record = records.read_optional(path)
    rows = endpoint_status(spec, state.registries(), creds, record)
    if as_json:
        _emit_json({"record": str(path) if record else None, "endpoints": [r.to_json() for r in rows]})
    else:
        click.echo(f"{'endpoint':<18} {'state':<8} {'tag':<14} {'attached':<10} serves")
        for r in rows:
            mark = "ok" if r.matches else ("-" if record is None else "DIFFERS")
            if r.error:
                mark = "AUTH" if r.error_kind == "auth" else "DOWN"
            docs = (
                ("+".join(k[:4] if s == "ok" else f"{k[:4]}({s})" for k, s in r.documents) or "none")
                if r.tag == spec.version and r.serves
                else ""
            )
            line = f"{r.endpoint:<18} {mark:<8} {r.tag:<14} {docs:<10} {r.serves or r.error or 'absent'}"
            click.echo(line[:100])
    _raise_for_errors([(r.endpoint, r.error, r.error_kind) for r in rows])
    version_rows = [r for r in rows if r.tag == spec.version]
    if record is not None and not all(r.matches for r in version_rows):
        msg = f"some endpoints do not serve {record.digest} as recorded in {path}"
        raise PublishError(msg)


def _raise_for_errors(found: list[tuple[str, str | None, str | None]]) -> None:
    """Exit 8 if an endpoint refused our credentials, else 10 if one did not answer."""
    from ..errors import RegistryAuthError, StackError

    refused = [(ep, err) for ep, err, kind in found if kind == "auth"]
    down = [(ep, err) for ep, err, kind in found if kind == "unreachable"]
    if refused:
        msg = f"{refused[0][0]} refused our credentials: {refused[0][1]}"
        raise RegistryAuthError(msg)
    if down:
        names = ", ".join(sorted({ep for ep, _ in down}))
        msg = f"unreachable: {names}: {down[0][1]}"
        raise StackError(msg)


@cli.command()
@ref_argument()
@click.option("--lang", type=click.Choice(["zh", "en"]), default="zh", show_default=True)
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
    from ..release import record as records
    from ..release.notes import render_notes

    spec = state.repo.load_ref(ref)
    record = records.read(Path(record_file)) if record_file else None
    result = render_notes(state.repo, spec, state.registries(), lang, record)
    if write_output(output, result.text, what="notes"):
        info(f"wrote {output}")


# --- release ------------------------------------------------------------------------------


@cli.command()
@ref_argument()
@click.option("--dry-run", is_flag=True, help="Show every stage's plan; change nothing.")
@click.option("--allow-overwrite", is_flag=True, help="Replace a version tag that holds other content.")
@click.option(
    "--with-bases",
    is_flag=True,
    help="First release every release of ours it builds on (its SDK base, parents first); a base "
    "already published is verified, not published again.",
)
@click.option("--json", "as_json", is_flag=True, help="The summary as JSON on stdout.")
@signing_key_option
@with_login
@pass_state
def release(state: State, ref: str, dry_run: bool, allow_overwrite: bool, with_bases: bool, as_json: bool,
            signing_key: str | None, username: str | None, password_stdin: bool) -> None:  # fmt: skip
    """Validate, render check, lock check, build, smoke test, publish, verify, write notes and record.

    \b
    Examples:
      xpu-release release training-cpu-pytorch:25.03 --dry-run
      xpu-release release training-cpu-pytorch:25.03 --with-bases
      xpu-release release training-cpu-pytorch:25.03 --json > summary.json
    """
    from ..errors import ReleaseError
    from ..manifest import parse_ref
    from ..release.pipeline import Release, Reporter
    from ..release.publish import Options

    # A dry run reads the login and the key too: it fails as the real run would.
    creds = _credentials(username, password_stdin, state.registries())
    signer = state.signer(signing_key)
    chain = [ref]
    if with_bases:
        state.repo.load_ref(ref)  # an unknown or invalid ref: its own clear error, before any base
        while (parent := state.repo.base_release(chain[0])) is not None and parent not in chain:
            chain.insert(0, parent)
    summaries = []
    for current in chain:
        latest = state.repo.is_latest(*parse_ref(current))
        options = Options(allow_overwrite=allow_overwrite, move_floating=latest, signer=signer)
        reporter = Reporter(live := _line_sink(), ci=state.settings.ci)
        run = Release(state.repo, current, state.registries(), creds, options, reporter,
                      dry_run=dry_run, builder=state.builder)  # fmt: skip
        try:
            summary = run.run()
        except ReleaseError:
            live.close()
            if as_json and run.failed is not None:
                _emit_json(run.failure_summary())  # always a summary on stdout, also on failure
            raise
        live.close()
        summaries.append(summary)
    if as_json:
        _emit_json(summaries[-1].to_json() if len(summaries) == 1 else [s.to_json() for s in summaries])
        return
    for summary in summaries:
        click.echo(f"{summary.ref}{' (dry run: nothing changed)' if summary.dry_run else ''}")
        for s in summary.stages:
            click.echo(f"  {s.name:<9} {status_word(s.status)} {s.seconds:7.1f} s  {s.detail}")
        if summary.record:
            for e in summary.record["endpoints"]:
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
@click.option("--json", "as_json", is_flag=True, help="Every check as JSON on stdout.")
@with_login
@pass_state
def doctor(state: State, refs: tuple[str, ...], as_json: bool, username: str | None,
           password_stdin: bool) -> None:  # fmt: skip
    """Check the whole setup read-only: manifests, locks, the engine, base images, the files
    builds fetch, every endpoint and its credentials. Default: the newest release of each image.

    \b
    Examples:
      xpu-release doctor
      xpu-release doctor training-cpu-pytorch:25.03 --json
    """
    from ..errors import PreflightFailed, ReleaseError
    from ..image.lock import load_lock
    from ..manifest import parse_ref
    from ..release.preflight import (
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
    creds = _credentials(username, password_stdin, registries)
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


@cli.command("from-tag")
@click.argument("tag")
@json_option("The ref, image and version as JSON on stdout.")
@pass_state
def from_tag(state: State, tag: str, as_json: bool) -> None:
    """Map a pushed git tag (NAME/VERSION or NAME-VERSION) to NAME:VERSION.

    \b
    Examples:
      xpu-release from-tag training-xpu-pytorch/25.03
      xpu-release from-tag refs/tags/training-xpu-pytorch-25.03 --json
    """
    from ..manifest import parse_ref
    from ..manifest.triggers import ref_from_tag

    ref = ref_from_tag(state.repo, tag)
    if as_json:
        image, version = parse_ref(ref)
        _emit_json({"tag": tag, "ref": ref, "image": image, "version": version})
    else:
        click.echo(ref)


@cli.command()
@click.option("--since", required=True, help="A git ref: list releases changed since it.")
@click.option("--json", "as_json", is_flag=True, help="A JSON list, for a CI build matrix.")
@click.option(
    "--waves", is_flag=True, help="With --json: a list of waves, parents before what builds on them."
)
@pass_state
def changed(state: State, since: str, as_json: bool, waves: bool) -> None:
    """NAME:VERSIONs whose manifest, template or image files changed since a git ref, and every
    release that builds on one of them; parents first.

    \b
    Examples:
      xpu-release changed --since origin/main
      xpu-release changed --since origin/main --json --waves
    """
    from ..manifest.triggers import changed_refs

    refs = changed_refs(state.repo, since)
    if as_json:
        click.echo(json.dumps(state.repo.build_order(refs) if waves else refs))
    else:
        for r in refs:
            click.echo(r)


@cli.command()
@ref_argument("refs", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Waves as JSON: [[ref, …], …].")
@pass_state
def order(state: State, refs: tuple[str, ...], as_json: bool) -> None:
    """REFs in build order: a release after the release it builds on (base.image). One per line;
    with --json, waves whose releases may run in parallel.

    \b
    Examples:
      xpu-release order training-cpu-pytorch:25.03 pytorch-cpu-sdk:2.13.0
    """
    from ..manifest import parse_ref

    for ref in refs:
        state.repo.load(*parse_ref(ref))  # unknown or invalid: its own clear error
    waves = state.repo.build_order(list(refs))
    if as_json:
        click.echo(json.dumps(waves))
    else:
        for wave in waves:
            for ref in wave:
                click.echo(ref)
