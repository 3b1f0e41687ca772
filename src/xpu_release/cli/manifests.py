"""Commands on manifests and generated files: validate, list, schema, render, plan, diff, new-version."""

from __future__ import annotations

import json
from datetime import date

import click

from ..errors import ReleaseError, StaleError
from ..guard.shown import shown
from ..manifest import ImageSpec, Repo
from .app import (
    State,
    _emit_json,
    cli,
    json_option,
    pass_state,
    ref_argument,
)
from .output import info, notice, print_plan, write_output

# --- manifests -------------------------------------------------------------------------------


def _review_horizon(repo: Repo, image: str) -> int:
    """How far ahead the image's exceptions may be reviewed: its newest release's
    ``security.review_horizon_days`` (the default when it cannot be read: its own problem is
    reported by validate)."""
    from ..evidence.vex import REVIEW_HORIZON_DAYS

    versions = repo.versions(image)
    try:
        return int(repo.load(image, versions[-1]).review_horizon_days) if versions else REVIEW_HORIZON_DAYS
    except ReleaseError:
        return REVIEW_HORIZON_DAYS


@cli.command()
@ref_argument("refs", nargs=-1)
@json_option("The manifests checked, their problems and notices as JSON on stdout.")
@pass_state
def validate(state: State, refs: tuple[str, ...], as_json: bool) -> None:
    """Validate every manifest (or the NAME:VERSIONs given); exit 2 listing every problem.

    \b
    Examples:
      xpu-release validate
      xpu-release validate training-xpu-pytorch:25.03 --json
    """
    from ..errors import ManifestError, Problem
    from ..manifest import parse_ref

    repo = state.repo
    state.registries()
    problems: list[Problem]
    if refs:
        problems, specs = [], []
        for ref in refs:
            try:
                specs.append(repo.load_ref(ref))
            except ManifestError as exc:
                problems.extend(exc.problems)
        count = len(refs)
    else:
        specs, problems = repo.load_all()
        count = len(specs) + len({p.file for p in problems})
    # An eStargz image's prefetch profile (images/<image>/<version>/prefetch.txt) is an input.
    from ..image.render import image_layers

    for spec in specs:
        try:
            image_layers(repo.root, spec)
        except ManifestError as exc:
            problems.extend(exc.problems)
    # The reviewed exceptions of the vulnerability gate (images/<image>/vex.openvex.json).
    from ..evidence.vex import read_vex, vex_path

    images = sorted({parse_ref(r)[0] for r in refs}) if refs else repo.images()
    for image in images:
        path = vex_path(repo.root, image)
        if path.exists():
            horizon = _review_horizon(repo, image)
            problems.extend(read_vex(path, repo.rel(path), today=date.today(), horizon_days=horizon)[1])
    notices = []
    if not problems:
        targets = (
            [parse_ref(r) for r in refs]
            if refs
            else [(i, v) for i in repo.images() for v in repo.versions(i)]
        )
        notices = [n for image, version in targets for n in repo.notices(image, version)]
    if as_json:
        _emit_json({"checked": count, "valid": not problems, "problems": [str(p) for p in problems],
                    "notices": [str(n) for n in notices]})  # fmt: skip
    if problems:
        raise ManifestError(problems)
    for n in notices:
        notice(str(n))
    tail = f" ({len(notices)} notice{'s' if len(notices) != 1 else ''} to check)" if notices else ""
    info(f"{count} manifest{'s' if count != 1 else ''} valid{tail}")


@cli.command("list")
@json_option()
@pass_state
def list_(state: State, as_json: bool) -> None:
    """List every NAME:VERSION with the version it extends, where its support stands today
    (supported, ending soon, end of life: from the manifest), whether its release record says it
    is withdrawn, and its security state as the latest `watch` found it (open findings, SLA, the
    patch that supersedes it).

    \b
    Examples:
      xpu-release list
      xpu-release list --json
    """
    from ..release.model.history import describe, security
    from .lifecycle import standing, withdrawn_on_record

    repo = state.repo
    specs = [repo.load_ref(ref) for ref in repo.refs()]
    withdrawn = [withdrawn_on_record(repo, spec) for spec in specs]
    watched = [security(repo.root, spec.image, spec.version) for spec in specs]
    if as_json:
        _emit_json([{"ref": spec.ref, "extends": spec.extends, "manifest": spec.manifest_path,
                     "support": standing(spec).to_json(), "withdrawn": None if isinstance(w, str) else w,
                     "record_unreadable": w if isinstance(w, str) else None, "security": sec}
                    for spec, w, sec in zip(specs, withdrawn, watched, strict=True)])  # fmt: skip
        return
    for spec, w, sec in zip(specs, withdrawn, watched, strict=True):
        said = [f"(extends {spec.extends})"] if spec.extends else []
        said += [standing(spec).words()] if spec.support is not None else []
        if isinstance(w, str):  # whether it is withdrawn cannot be told from the record
            why = shown(w, 200)
            said += [f"withdrawn: cannot tell from its record ({why}); `xpu-release status {spec.ref}` asks"]
        elif w:
            said += [f"withdrawn {shown(str(w['at']), 40)}: {shown(str(w['reason']), 200)}"]
        said += [f"[{describe(sec)}]"] if isinstance(sec, dict) else []
        click.echo("  ".join([spec.ref, *said]))


@cli.command()
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write to FILE ('-': stdout).")
def schema(output: str | None) -> None:
    """Print the JSON Schema of the manifest format.

    \b
    Examples:
      xpu-release schema > manifest.schema.json
      xpu-release schema -o schema/manifest.schema.json
    """
    from ..manifest.schema import json_schema

    text = json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
    if write_output(output, text, what="schema"):
        info(f"wrote {output}")


@cli.command()
@ref_argument("refs", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Every manifest in the repository.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 with a diff if any is stale.")
@click.option("--stdout", is_flag=True, help="Print the Dockerfile instead of writing it.")
@json_option("With --check: the stale and current files as JSON on stdout.")
@pass_state
def render(state: State, refs: tuple[str, ...], all_: bool, check: bool, stdout: bool, as_json: bool) -> None:
    """Render manifests into their committed Dockerfiles (images/<name>/<version>/Dockerfile).

    \b
    Examples:
      xpu-release render training-xpu-pytorch:25.04
      xpu-release render --all --check
    """
    from ..image import render as rendering
    from ..manifest.registries import load_registries

    repo = state.repo
    specs = _chosen(repo, refs, all_)
    stale = []
    registries = load_registries(repo.root)  # the repository's own: what committed Dockerfiles name
    for spec in specs:
        out = rendering.render(repo.root, spec, registries)
        rel = repo.rel(out.path)
        if stdout:
            click.echo(out.text, nl=False)
        elif check:
            d = rendering.stale_diff(out, repo.root)
            stale += [rel] if d else []
            if d and not as_json:
                click.echo(d, nl=False)
        else:
            info(f"wrote {rel}" if rendering.write(out, repo.root) else f"{rel} is current")
    if all_ and (schema := _schema(repo, write=not (check or stdout))) is not None and check:
        stale.append(schema)
    if as_json and check:
        _emit_json({"stale": stale, "checked": len(specs) + (1 if all_ else 0), "current": not stale})
    if stale:
        msg = f"{len(stale)} generated file(s) are stale: {', '.join(stale)}\nrun: xpu-release render --all"
        raise StaleError(msg)
    if check:
        info(f"{len(specs)} Dockerfile{'s' if len(specs) != 1 else ''} current")


def _chosen(repo: Repo, refs: tuple[str, ...], all_: bool) -> list[ImageSpec]:
    """The manifests a command names: each of ``refs``, or every one (``--all``; any invalid
    manifest stops it)."""
    from ..errors import ConfigError, ManifestError

    if all_ == bool(refs):
        msg = "name NAME:VERSION or pass --all"
        raise ConfigError(msg)
    if not all_:
        return [repo.load_ref(r) for r in refs]
    specs, problems = repo.load_all()
    if problems:
        raise ManifestError(problems)
    return list(specs)


def _schema(repo: Repo, *, write: bool) -> str | None:
    """The committed manifest schema, written when stale and ``write``; its path when it was stale."""
    from ..guard.generated import is_current, write_generated
    from ..manifest.schema import json_schema

    schema_path = repo.root / "schema" / "manifest.schema.json"
    data = (json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n").encode()
    if is_current(schema_path, data, what=repo.rel(schema_path)):
        return None
    if write:
        write_generated(schema_path, data, root=repo.root, what="schema")
        info(f"wrote {repo.rel(schema_path)}")
    return str(repo.rel(schema_path))


@cli.command()
@ref_argument()
@json_option()
@pass_state
def plan(state: State, ref: str, as_json: bool) -> None:
    """Every ref a publish of NAME:VERSION would push, per registry and region (offline: the
    floating tags by the manifests; `publish --dry-run` asks the registries about withdrawals).

    \b
    Examples:
      xpu-release plan training-xpu-pytorch:25.03
      xpu-release plan training-xpu-pytorch:25.03 --json
    """
    from ..release.model.line import forward, newer_version
    from ..release.model.plan import make_plan

    spec = state.repo.load_ref(ref)
    p = make_plan(spec, state.registries(), newer=newer_version(state.repo, spec),
                  moves=forward(state.repo, spec))  # fmt: skip
    if as_json:
        _emit_json(p.to_json())
        return
    print_plan(p, f"{spec.ref}  ({spec.manifest_path})")
    info("(the floating tags by the manifests alone: a tag every newer release left by withdrawal "
         "also comes to it; `publish --dry-run` asks the registries)")  # fmt: skip


@cli.command()
@ref_argument("old", metavar="OLD")
@ref_argument("new", metavar="NEW")
@json_option()
@pass_state
def diff(state: State, old: str, new: str, as_json: bool) -> None:
    """What changed from OLD to NEW (both NAME:VERSION).

    \b
    Examples:
      xpu-release diff training-xpu-pytorch:25.03 training-xpu-pytorch:25.04
    """
    from dataclasses import asdict

    from ..manifest.diff import diff as compute
    from ..release.run.evalnotes import evaluation_changes
    from ..release.run.notes import security_changes

    repo = state.repo
    old_spec, new_spec = repo.load_ref(old), repo.load_ref(new)
    # With both releases' records: the vulnerabilities fixed and newly found (section security);
    # with NEW's, how it measured against OLD (section evaluation).
    changes = [*compute(old_spec, new_spec), *security_changes(repo, old_spec, new_spec),
               *evaluation_changes(repo, old_spec, new_spec)]  # fmt: skip
    if as_json:
        _emit_json([asdict(c) for c in changes])
        return
    if not changes:
        click.echo(f"no changes between {old} and {new}")
    for c in changes:
        click.echo(f"{c.section:<12} {c}")


@cli.command("new-version")
@ref_argument()
@click.option("--from", "parent", required=True, help="The version it extends, e.g. 25.03.")
@click.option("--set", "sets", multiple=True, metavar="COMPONENT=VERSION", help="A pin to change.")
@pass_state
def new_version(state: State, ref: str, parent: str, sets: tuple[str, ...]) -> None:
    """Start NAME:VERSION as --from plus the --set pins, and render its Dockerfile.

    \b
    Examples:
      xpu-release new-version training-xpu-pytorch:25.04 --from 25.03 --set vllm=0.8.0
    """
    from ..image import render as rendering
    from ..manifest import parse_ref
    from ..manifest.bump import new_version as create
    from ..manifest.bump import parse_sets
    from ..manifest.registries import load_registries

    image, version = parse_ref(ref)
    repo = state.repo
    path, spec = create(repo, image, version, parent, parse_sets(sets))
    info(f"wrote {repo.rel(path)}")
    for n in repo.notices(image, version):
        notice(str(n))
    out = rendering.render(repo.root, spec, load_registries(repo.root))
    rendering.write(out, repo.root)
    info(f"wrote {repo.rel(out.path)}")
