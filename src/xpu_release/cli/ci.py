"""Commands for CI: from-tag (a pushed tag → NAME:VERSION), changed (what a change touches), order."""

from __future__ import annotations

import json

import click

from ..manifest.order import build_order
from .app import (
    State,
    _emit_json,
    cli,
    json_option,
    pass_state,
    ref_argument,
)


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
@json_option("A JSON list, for a CI build matrix.")
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
        click.echo(json.dumps(build_order(state.repo, refs) if waves else refs))
    else:
        for r in refs:
            click.echo(r)


@cli.command()
@ref_argument("refs", nargs=-1, required=True)
@json_option("Waves as JSON: [[ref, …], …].")
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
    waves = build_order(state.repo, list(refs))
    if as_json:
        click.echo(json.dumps(waves))
    else:
        for wave in waves:
            for ref in wave:
                click.echo(ref)
