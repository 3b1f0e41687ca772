"""Commands for CI: from-tag (a pushed tag → NAME:VERSION), changed (what a change touches), order."""

from __future__ import annotations

import json

import click

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
@json_option(
    "The ref, image, version and platforms as JSON on stdout: each platform the manifest declares "
    "with its slug (linux-arm64) and its image's tag in the engine (local_ref), for a CI job per platform."
)
@pass_state
def from_tag(state: State, tag: str, as_json: bool) -> None:
    """Map a pushed git tag (NAME/VERSION or NAME-VERSION) to NAME:VERSION.

    \b
    Examples:
      xpu-release from-tag training-xpu-pytorch/25.03
      xpu-release from-tag refs/tags/training-xpu-pytorch-25.03 --json
    """
    from ..manifest.triggers import ref_from_tag

    ref = ref_from_tag(state.repo, tag)
    if as_json:
        spec = state.repo.load_ref(ref)
        platforms = [
            {"platform": p.name, "slug": p.slug, "local_ref": p.local_ref(ref)} for p in spec.platforms
        ]
        _emit_json(
            {"tag": tag, "ref": ref, "image": spec.image, "version": spec.version, "platforms": platforms}
        )
    else:
        click.echo(ref)


@cli.command()
@click.option("--since", required=True, help="A git ref: list releases changed since it.")
@json_option("A JSON list, for a CI build matrix.")
@click.option(
    "--waves", is_flag=True, help="With --json: a list of waves, parents before what builds on them."
)
@click.option(
    "--gitlab-pipeline",
    is_flag=True,
    help="A GitLab child pipeline (YAML) on stdout: one job per release, after the job of the "
    "release it builds on.",
)
@pass_state
def changed(state: State, since: str, as_json: bool, waves: bool, gitlab_pipeline: bool) -> None:
    """NAME:VERSIONs whose manifest, template or image files changed since a git ref, and every
    release that builds on one of them; parents first.

    \b
    Examples:
      xpu-release changed --since origin/main
      xpu-release changed --since origin/main --json --waves
      xpu-release changed --since "$CI_MERGE_REQUEST_DIFF_BASE_SHA" --gitlab-pipeline > changed.yml
    """
    from ..manifest.order import build_order
    from ..manifest.triggers import changed_refs

    if as_json and gitlab_pipeline:
        msg = "--json and --gitlab-pipeline each write stdout: choose one"
        raise click.UsageError(msg)
    refs = changed_refs(state.repo, since)
    if gitlab_pipeline:
        waves_found = build_order(state.repo, refs)
        parents = {r: state.repo.base_release(r) for r in refs}
        click.echo(gitlab_child_pipeline(waves_found, parents, since=since), nl=False)
        return
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
    from ..manifest.order import build_order

    for ref in refs:
        state.repo.load(*parse_ref(ref))  # unknown or invalid: its own clear error
    waves = build_order(state.repo, list(refs))
    if as_json:
        click.echo(json.dumps(waves))
    else:
        for wave in waves:
            for ref in wave:
                click.echo(ref)


# --- GitLab's fan-out -------------------------------------------------------------------------

GITLAB_SETUP = [
    "python3 -m venv .venv",
    ".venv/bin/pip install -q -e .",
    'export PATH="$PWD/.venv/bin:$PATH"',
]


def gitlab_child_pipeline(waves: list[list[str]], parents: dict[str, str | None], *, since: str) -> str:
    """The child pipeline of a merge request: every changed release built and smoke-tested in a
    job of its own, each after the job of the release it builds on (``needs``), one stage per
    wave. With nothing changed, one job that says so (GitLab refuses a pipeline with no job)."""
    import shlex

    import yaml

    doc: dict[str, object] = {}
    if not any(waves):
        doc["stages"] = ["wave-0"]
        doc["nothing changed"] = {
            "stage": "wave-0",
            "script": [f"echo {shlex.quote(f'no release changed since {since}')}"],
        }
    else:
        doc["stages"] = [f"wave-{i}" for i in range(len(waves))]
        doc["default"] = {"tags": ["docker"], "before_script": GITLAB_SETUP}
        for i, wave in enumerate(waves):
            for ref in wave:
                parent = parents.get(ref)
                needs = [f"build {parent}"] if parent is not None and any(parent in w for w in waves) else []
                doc[f"build {ref}"] = {
                    "stage": f"wave-{i}",
                    "needs": needs,
                    "script": [f"xpu-release build {ref}", f"xpu-release test {ref}"],
                }
    header = (
        f"# Generated by `xpu-release changed --since {since} --gitlab-pipeline`: one job per\n"
        "# release the change touches, each after the job of the release it builds on.\n"
        "# assumed: runners tagged `docker` have a Docker engine (as in .gitlab-ci.yml).\n"
    )
    return header + yaml.safe_dump(doc, sort_keys=False, width=100)
