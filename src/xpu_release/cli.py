"""The ``xpu-release`` command line: Click, option parsing, output, and exit codes. Nothing else.

Every stage lives in its own module; this file only wires them together and maps the
``ReleaseError`` hierarchy (``errors.py``) to messages and exit statuses.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click

from . import __version__
from .credentials import CredentialStore
from .errors import ReleaseError, StaleError

F = TypeVar("F", bound=Callable[..., Any])
INTERNAL_ERROR = 70
INTERRUPTED = 130


@dataclass
class State:
    root_option: str | None
    registries_option: str | None
    debug: bool
    _repo: Any = field(default=None, init=False)

    @property
    def repo(self) -> Any:
        from .manifest import Repo

        if self._repo is None:
            self._repo = Repo.discover(self.root_option)
        return self._repo

    @property
    def root(self) -> Path:
        return self.repo.root  # type: ignore[no-any-return]

    def registries(self) -> Any:
        from .endpoints import load_registries

        return load_registries(self.root, self.registries_option)


pass_state = click.make_pass_decorator(State)


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


class ReleaseGroup(click.Group):
    """Maps ``ReleaseError`` to a message on stderr and its exit code; no traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ReleaseError as exc:
            click.echo(f"error: {exc.render()}", err=True)
            raise click.exceptions.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            raise click.exceptions.Exit(INTERRUPTED) from None
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:
            if isinstance(ctx.obj, State) and ctx.obj.debug:
                raise
            click.echo(
                f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for a traceback)",
                err=True,
            )
            raise click.exceptions.Exit(INTERNAL_ERROR) from None


@click.group(cls=ReleaseGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="xpu-release")
@click.option(
    "--root",
    envvar="XPU_RELEASE_ROOT",
    type=click.Path(file_okay=False),
    help="Repository root (default: found upwards from the current folder).",
)
@click.option(
    "--registries",
    "registries",
    envvar="XPU_RELEASE_REGISTRIES",
    type=click.Path(dir_okay=False),
    help="A registries file that overrides registries.yaml (e.g. local endpoints).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks for internal errors.")
@click.pass_context
def cli(ctx: click.Context, root: str | None, registries: str | None, debug: bool) -> None:
    """Release pipeline for accelerator container images."""
    ctx.obj = State(root_option=root, registries_option=registries, debug=debug)


# --- manifests -------------------------------------------------------------------------------


@cli.command()
@click.argument("refs", nargs=-1)
@pass_state
def validate(state: State, refs: tuple[str, ...]) -> None:
    """Validate every manifest (or the NAME:VERSIONs given); exit 2 listing every problem."""
    from .errors import ManifestError, Problem

    repo = state.repo
    state.registries()
    problems: list[Problem]
    if refs:
        problems = []
        for ref in refs:
            try:
                repo.load_ref(ref)
            except ManifestError as exc:
                problems.extend(exc.problems)
        count = len(refs)
    else:
        specs, problems = repo.load_all()
        count = len(specs) + len({p.file for p in problems})
    if problems:
        raise ManifestError(problems)
    click.echo(f"{count} manifest{'s' if count != 1 else ''} valid")


@cli.command("list")
@click.option("--json", "as_json", is_flag=True)
@pass_state
def list_(state: State, as_json: bool) -> None:
    """List every NAME:VERSION with the version it extends."""
    repo = state.repo
    rows = []
    for ref in repo.refs():
        spec = repo.load_ref(ref)
        rows.append({"ref": ref, "extends": spec.extends, "manifest": spec.manifest_path})
    if as_json:
        _emit_json(rows)
        return
    for r in rows:
        click.echo(f"{r['ref']}" + (f"  (extends {r['extends']})" if r["extends"] else ""))


@cli.command()
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write to a file.")
def schema(output: str | None) -> None:
    """Print the JSON Schema of the manifest format."""
    from .manifest.schema import json_schema

    text = json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
    if output:
        Path(output).write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)


@cli.command()
@click.argument("refs", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Every manifest in the repository.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 with a diff if any is stale.")
@click.option("--stdout", is_flag=True, help="Print the Dockerfile instead of writing it.")
@pass_state
def render(state: State, refs: tuple[str, ...], all_: bool, check: bool, stdout: bool) -> None:
    """Render manifests into their committed Dockerfiles (images/<name>/<version>/Dockerfile)."""
    from . import render as rendering
    from .errors import ConfigError, ManifestError
    from .manifest.schema import json_schema

    repo = state.repo
    if all_ == bool(refs):
        msg = "name NAME:VERSION or pass --all"
        raise ConfigError(msg)
    if all_:
        specs, problems = repo.load_all()
        if problems:
            raise ManifestError(problems)
    else:
        specs = [repo.load_ref(r) for r in refs]
    stale = []
    for spec in specs:
        out = rendering.render(repo.root, spec)
        rel = repo.rel(out.path)
        if stdout:
            click.echo(out.text, nl=False)
        elif check:
            d = rendering.stale_diff(out, repo.root)
            if d:
                stale.append(rel)
                click.echo(d, nl=False)
        elif rendering.write(out):
            click.echo(f"wrote {rel}")
        else:
            click.echo(f"{rel} is current")
    if all_:
        schema_path = repo.root / "schema" / "manifest.schema.json"
        text = json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
        current = schema_path.read_text(encoding="utf-8") if schema_path.is_file() else ""
        if current != text:
            if check:
                stale.append(repo.rel(schema_path))
            elif not stdout:
                schema_path.parent.mkdir(exist_ok=True)
                schema_path.write_text(text, encoding="utf-8")
                click.echo(f"wrote {repo.rel(schema_path)}")
    if stale:
        msg = f"{len(stale)} generated file(s) are stale: {', '.join(stale)}\nrun: xpu-release render --all"
        raise StaleError(msg)
    if check:
        click.echo(f"{len(specs)} Dockerfile{'s' if len(specs) != 1 else ''} current")


@cli.command()
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True)
@pass_state
def plan(state: State, ref: str, as_json: bool) -> None:
    """Every ref a publish of NAME:VERSION would push, per registry and region."""
    from .plan import make_plan

    spec = state.repo.load_ref(ref)
    p = make_plan(spec, state.registries())
    if as_json:
        _emit_json(p.to_json())
        return
    click.echo(f"{spec.ref}  ({spec.manifest_path})")
    for t in p.targets:
        click.echo(f"  {t.endpoint.name:<24} {t.version_ref}")
        for f in t.floating_refs:
            click.echo(f"  {'':<24} {f}  (floating, moved after every endpoint verifies)")


@cli.command()
@click.argument("old")
@click.argument("new")
@click.option("--json", "as_json", is_flag=True)
@pass_state
def diff(state: State, old: str, new: str, as_json: bool) -> None:
    """What changed from OLD to NEW (both NAME:VERSION)."""
    from dataclasses import asdict

    from .diff import diff as compute

    repo = state.repo
    changes = compute(repo.load_ref(old), repo.load_ref(new))
    if as_json:
        _emit_json([asdict(c) for c in changes])
        return
    if not changes:
        click.echo(f"no changes between {old} and {new}")
    for c in changes:
        click.echo(f"{c.section:<12} {c}")


@cli.command("new-version")
@click.argument("ref")
@click.option("--from", "parent", required=True, help="The version it extends, e.g. 25.03.")
@click.option("--set", "sets", multiple=True, metavar="COMPONENT=VERSION", help="A pin to change.")
@pass_state
def new_version(state: State, ref: str, parent: str, sets: tuple[str, ...]) -> None:
    """Start NAME:VERSION as --from plus the --set pins, and render its Dockerfile."""
    from . import render as rendering
    from .bump import new_version as create
    from .bump import parse_sets
    from .manifest import parse_ref

    image, version = parse_ref(ref)
    repo = state.repo
    path, spec = create(repo, image, version, parent, parse_sets(sets))
    click.echo(f"wrote {repo.rel(path)}")
    out = rendering.render(repo.root, spec)
    rendering.write(out)
    click.echo(f"wrote {repo.rel(out.path)}")


# --- build and test ------------------------------------------------------------------------


def _line_sink() -> Callable[[str], None]:
    """Build and push output: every line in CI logs; in a terminal, one line per step."""
    tty = sys.stderr.isatty()

    def sink(line: str) -> None:
        if not tty or line.startswith(("Step ", "pulling", "Successfully", "pushing", "copying")):
            click.echo(line, err=True)

    return sink


@cli.command()
@click.argument("ref")
@click.option("--check", is_flag=True, help="Resolve nothing; exit 4 if the committed lock is stale.")
@pass_state
def lock(state: State, ref: str, check: bool) -> None:
    """Resolve NAME:VERSION's pip pins into images/<name>/<version>/requirements.lock (hashed)."""
    from .lock import load_lock, lock_path, resolve

    spec = state.repo.load_ref(ref)
    path = lock_path(state.root, spec)
    if check:
        load_lock(state.root, spec)
        click.echo(f"{state.repo.rel(path)} is current")
        return
    result = resolve(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(result.render(spec), encoding="utf-8")
    count = sum(len(layer.packages) for layer in result.layers)
    click.echo(f"wrote {state.repo.rel(path)} ({count} distributions in {len(result.layers)} layers)")


@cli.command()
@click.argument("ref")
@click.option("--rebuild", is_flag=True, help="Build even if an image with the same inputs exists.")
@click.option("--json", "as_json", is_flag=True)
@pass_state
def build(state: State, ref: str, rebuild: bool, as_json: bool) -> None:
    """Build NAME:VERSION with the Docker engine (hermetic; skipped when inputs are unchanged)."""
    from dataclasses import asdict

    from .build import build_image
    from .engine import Engine

    spec = state.repo.load_ref(ref)
    built = build_image(
        state.root, spec, state.registries(), Engine.connect(), rebuild=rebuild, on_line=_line_sink()
    )
    if as_json:
        _emit_json(asdict(built))
        return
    verb = "up to date" if built.skipped else f"built in {built.seconds:.0f} s"
    click.echo(f"{built.ref} {verb}: {built.image_id} ({built.size / 1e6:.0f} MB)")


@cli.command("test")
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True)
@pass_state
def test_(state: State, ref: str, as_json: bool) -> None:
    """Smoke-test the built NAME:VERSION inside a throwaway container (testinfra)."""
    from dataclasses import asdict

    from .engine import Engine
    from .smoke import smoke_test

    spec = state.repo.load_ref(ref)
    result = smoke_test(state.root, spec, Engine.connect(), on_line=_line_sink())
    if as_json:
        _emit_json(asdict(result))
        return
    click.echo(f"{spec.ref}: {result.passed} checks passed ({result.image_id})")


# --- publish -----------------------------------------------------------------------------


def _credentials(username: str | None, password_stdin: bool) -> Any:
    from .credentials import USER_ENV, Credentials
    from .errors import ConfigError
    from .secrets import register

    if not password_stdin:
        return CredentialStore()
    user = username or os.environ.get(USER_ENV)
    if not user:
        msg = f"--password-stdin needs --username (or {USER_ENV})"
        raise ConfigError(msg)
    password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        msg = "--password-stdin: no password on standard input"
        raise ConfigError(msg)
    register(password)
    return CredentialStore(explicit=Credentials(username=user, password=password))


def _print_record(record: Any) -> None:
    click.echo(f"{record.ref}  {record.digest or '(no digest)'}")
    for e in record.endpoints:
        detail = (
            e.error
            or f"{e.seconds:.1f} s, {e.uploaded_bytes / 1e6:.1f} MB up, {e.skipped_blobs} blobs present"
        )
        click.echo(f"  {e.endpoint:<22} {e.status:<10} {e.version_ref}  ({detail})")
    for ref in record.floating_moved:
        click.echo(f"  moved {ref}")


login_options = [
    click.option("--username", envvar="XPU_RELEASE_USERNAME", help="Registry user (with --password-stdin)."),
    click.option("--password-stdin", is_flag=True, help="Read the registry password from stdin."),
]


def with_login(f: F) -> F:
    for option in reversed(login_options):
        f = option(f)
    return f


@cli.command()
@click.argument("ref")
@click.option("--dry-run", is_flag=True, help="Print the plan; touch nothing.")
@click.option("--allow-overwrite", is_flag=True, help="Replace a version tag that holds other content.")
@click.option("--record", "record_file", type=click.Path(dir_okay=False), help="Where to write the record.")
@click.option("--chunk-size", type=click.IntRange(min=1 << 20), help="Chunked blob uploads of this size.")
@click.option("--json", "as_json", is_flag=True)
@with_login
@pass_state
def publish(
    state: State,
    ref: str,
    dry_run: bool,
    allow_overwrite: bool,
    record_file: str | None,
    chunk_size: int | None,
    as_json: bool,
    username: str | None,
    password_stdin: bool,
) -> None:
    """Publish the tested NAME:VERSION to the public registry and every VPC region, verified."""
    from . import record as records
    from .engine import Engine
    from .errors import PublishError
    from .plan import make_plan
    from .publish import Options, failure_report, newest
    from .publish import publish as run_publish

    spec = state.repo.load_ref(ref)
    registries = state.registries()
    if dry_run:
        plan = make_plan(spec, registries)
        if as_json:
            _emit_json({**plan.to_json(), "dry_run": True})
            return
        click.echo(f"would publish {spec.ref} (dry run: nothing is touched)")
        for t in plan.targets:
            click.echo(f"  {t.endpoint.name:<22} {t.version_ref}")
        for f in (r for t in plan.targets for r in t.floating_refs):
            click.echo(f"  then move {f} (after every endpoint verifies)")
        return
    creds = _credentials(username, password_stdin)
    options = Options(
        allow_overwrite=allow_overwrite, chunk_size=chunk_size, move_floating=newest(state.repo, spec)
    )
    result = run_publish(spec, registries, Engine.connect(), creds, options, _line_sink())
    path = Path(record_file) if record_file else records.default_path(state.root, spec.image, spec.version)
    records.write(result, path)
    if as_json:
        _emit_json(result.to_json())
    else:
        _print_record(result)
        click.echo(f"record: {path}")
    if not result.complete:
        raise PublishError(failure_report(result))


@cli.command()
@click.argument("ref")
@click.option("--record", "record_file", type=click.Path(dir_okay=False), help="The record to compare with.")
@click.option("--json", "as_json", is_flag=True)
@with_login
@pass_state
def status(
    state: State, ref: str, record_file: str | None, as_json: bool, username: str | None, password_stdin: bool
) -> None:
    """What every endpoint serves now for NAME:VERSION, against its release record."""
    from . import record as records
    from .errors import PublishError
    from .publish import status as endpoint_status

    spec = state.repo.load_ref(ref)
    path = Path(record_file) if record_file else records.default_path(state.root, spec.image, spec.version)
    record = records.read(path) if path.is_file() else None
    rows = endpoint_status(spec, state.registries(), _credentials(username, password_stdin), record)
    if as_json:
        _emit_json({"record": str(path) if record else None, "endpoints": rows})
    else:
        for r in rows:
            mark = "ok" if r["matches"] else ("-" if record is None else "DIFFERS")
            click.echo(f"{r['endpoint']:<22} {mark:<8} {r['ref']}  {r['serves'] or r['error'] or 'absent'}")
    version_rows = [r for r in rows if str(r["ref"]).endswith(f":{spec.version}")]
    if record is not None and not all(r["matches"] for r in version_rows):
        msg = f"some endpoints do not serve {record.digest} as recorded in {path}"
        raise PublishError(msg)


@cli.command()
@click.argument("ref")
@click.option("--lang", type=click.Choice(["zh", "en"]), default="zh", show_default=True)
@click.option(
    "--record",
    "record_file",
    type=click.Path(dir_okay=False),
    help="A release record: adds the published refs and digests.",
)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write to a file.")
@pass_state
def notes(state: State, ref: str, lang: str, record_file: str | None, output: str | None) -> None:
    """Release notes of NAME:VERSION in Markdown, from its manifest (and its release record)."""
    from . import record as records
    from .notes import render_notes

    spec = state.repo.load_ref(ref)
    record = records.read(Path(record_file)) if record_file else None
    result = render_notes(state.repo, spec, state.registries(), lang, record)
    if output:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(result.text, encoding="utf-8")
        click.echo(f"wrote {output}")
    else:
        click.echo(result.text, nl=False)


# --- release ------------------------------------------------------------------------------


@cli.command()
@click.argument("ref")
@click.option("--dry-run", is_flag=True, help="Show every stage's plan; change nothing.")
@click.option("--allow-overwrite", is_flag=True, help="Replace a version tag that holds other content.")
@click.option("--json", "as_json", is_flag=True, help="The summary as JSON on stdout.")
@with_login
@pass_state
def release(state: State, ref: str, dry_run: bool, allow_overwrite: bool, as_json: bool, username: str | None,
            password_stdin: bool) -> None:  # fmt: skip
    """Validate, render check, lock check, build, smoke test, publish, verify, write notes and record."""
    from .manifest import parse_ref
    from .publish import Options, newest
    from .release import Release, Reporter

    creds = CredentialStore() if dry_run else _credentials(username, password_stdin)
    image, version = parse_ref(ref)
    is_newest = version in state.repo.versions(image) and newest(state.repo, state.repo.load(image, version))
    options = Options(allow_overwrite=allow_overwrite, move_floating=is_newest)
    run = Release(state.repo, ref, state.registries(), creds, options,
                  Reporter(lambda line: click.echo(line, err=True)), dry_run=dry_run)  # fmt: skip
    summary = run.run()
    if as_json:
        _emit_json(summary.to_json())
        return
    click.echo(f"{summary.ref}{' (dry run: nothing changed)' if summary.dry_run else ''}")
    for s in summary.stages:
        click.echo(f"  {s.name:<8} {s.status:<8} {s.seconds:7.1f} s  {s.detail}")
    if summary.record:
        for e in summary.record["endpoints"]:
            click.echo(f"  {e['endpoint']:<22} {e['version_ref']}  {e['digest']}")
    for path in summary.notes:
        click.echo(f"  notes: {path}")


cli.add_command(release, "build-release")


@cli.command("from-tag")
@click.argument("tag")
@pass_state
def from_tag(state: State, tag: str) -> None:
    """Map a pushed git tag (NAME/VERSION or NAME-VERSION) to NAME:VERSION."""
    from .triggers import ref_from_tag

    click.echo(ref_from_tag(state.repo, tag))


@cli.command()
@click.option("--since", required=True, help="A git ref: list releases changed since it.")
@click.option("--json", "as_json", is_flag=True, help="A JSON list, for a CI build matrix.")
@pass_state
def changed(state: State, since: str, as_json: bool) -> None:
    """NAME:VERSIONs whose manifest, template or image files changed since a git ref."""
    from .triggers import changed_refs

    refs = changed_refs(state.repo, since)
    if as_json:
        click.echo(json.dumps(refs))
    else:
        for r in refs:
            click.echo(r)


def main() -> None:
    """Entry point of the ``xpu-release`` script."""
    cli(prog_name="xpu-release")
