"""Commands on manifests and generated files: validate, list, schema, render, plan, diff, new-version."""

from __future__ import annotations

import json

import click

from ..errors import StaleError
from .app import State, _emit_json, cli, newer_version, pass_state, print_plan, write_output

# --- manifests -------------------------------------------------------------------------------


@cli.command()
@click.argument("refs", nargs=-1)
@pass_state
def validate(state: State, refs: tuple[str, ...]) -> None:
    """Validate every manifest (or the NAME:VERSIONs given); exit 2 listing every problem."""
    from ..errors import ManifestError, Problem
    from ..manifest import parse_ref

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
    targets = (
        [parse_ref(r) for r in refs] if refs else [(i, v) for i in repo.images() for v in repo.versions(i)]
    )
    notices = [n for image, version in targets for n in repo.notices(image, version)]
    for n in notices:
        click.echo(f"notice: {n}", err=True)
    tail = f" ({len(notices)} notice{'s' if len(notices) != 1 else ''} to check)" if notices else ""
    click.echo(f"{count} manifest{'s' if count != 1 else ''} valid{tail}")


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
    from ..manifest.schema import json_schema

    text = json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
    if write_output(output, text, what="schema"):
        click.echo(f"wrote {output}", err=True)


@cli.command()
@click.argument("refs", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Every manifest in the repository.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 with a diff if any is stale.")
@click.option("--stdout", is_flag=True, help="Print the Dockerfile instead of writing it.")
@pass_state
def render(state: State, refs: tuple[str, ...], all_: bool, check: bool, stdout: bool) -> None:
    """Render manifests into their committed Dockerfiles (images/<name>/<version>/Dockerfile)."""
    from .. import render as rendering
    from ..errors import ConfigError, ManifestError
    from ..manifest.schema import json_schema

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
    from ..plan import make_plan

    spec = state.repo.load_ref(ref)
    p = make_plan(spec, state.registries(), newer=newer_version(state.repo, spec.image, spec.version))
    if as_json:
        _emit_json(p.to_json())
        return
    print_plan(p, f"{spec.ref}  ({spec.manifest_path})")


@cli.command()
@click.argument("old")
@click.argument("new")
@click.option("--json", "as_json", is_flag=True)
@pass_state
def diff(state: State, old: str, new: str, as_json: bool) -> None:
    """What changed from OLD to NEW (both NAME:VERSION)."""
    from dataclasses import asdict

    from ..diff import diff as compute

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
    from .. import render as rendering
    from ..bump import new_version as create
    from ..bump import parse_sets
    from ..manifest import parse_ref

    image, version = parse_ref(ref)
    repo = state.repo
    path, spec = create(repo, image, version, parent, parse_sets(sets))
    click.echo(f"wrote {repo.rel(path)}")
    for n in repo.notices(image, version):
        click.echo(f"notice: {n}", err=True)
    out = rendering.render(repo.root, spec)
    rendering.write(out)
    click.echo(f"wrote {repo.rel(out.path)}")
