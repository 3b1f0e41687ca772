"""Commands on images in the engine: lock, build, test, repro, sbom."""

from __future__ import annotations

import click

from .app import (
    State,
    _emit_json,
    cli,
    json_option,
    pass_state,
    ref_argument,
)
from .output import _line_sink, info, write_output

# --- build and test ------------------------------------------------------------------------


@cli.command()
@ref_argument()
@click.option(
    "--check",
    is_flag=True,
    help="Resolve no pins; exit 4 if the committed lock is stale or the base tag has moved.",
)
@json_option("With --check: whether the lock is current, and its base digest, as JSON on stdout.")
@pass_state
def lock(state: State, ref: str, check: bool, as_json: bool) -> None:
    """Resolve NAME:VERSION's pip pins into images/<name>/<version>/requirements.lock (hashed),
    and pin the base image's tag to the digest it points at now.

    \b
    Examples:
      xpu-release lock training-cpu-pytorch:25.03
      xpu-release lock training-cpu-pytorch:25.03 --check --json
    """
    from ..errors import LockError
    from ..image.baseimage import current_digest, ensure, provided, pull_auth
    from ..image.lock import base_missing, check_base, check_index, load_lock, lock_path, pin_base, resolve

    spec = state.repo.load_ref(ref)
    path = lock_path(state.root, spec)
    if check:
        from ..errors import ReleaseError

        try:
            committed = load_lock(state.root, spec)
            current = current_digest(spec, state.registries(), state.credentials())
            check_base(committed, spec, current, state.repo.rel(path))
        except ReleaseError as exc:
            if as_json:
                said = exc.message.splitlines()[0]
                _emit_json({"lock": state.repo.rel(path), "current": False, "error": said,
                            "exit_code": exc.exit_code})  # fmt: skip
            raise
        if as_json:
            _emit_json({"lock": state.repo.rel(path), "current": True, "base_digest": committed.base_digest})
        else:
            info(f"{state.repo.rel(path)} is current (base {committed.base_digest[:19]})")
        return
    check_index(spec)  # an unreachable index is the first thing to say
    registries = state.registries()
    current = current_digest(spec, registries, state.credentials())
    if current is None:
        msg = f"{base_missing(spec)}: nothing to pin. No lock was written."
        raise LockError(msg)
    base = pin_base(spec, current)
    # What the base provides is a fact of the lock: asked of the pinned base itself.
    from ..image.engine import Engine

    engine = Engine.connect()
    ref_by_digest = f"{registries.endpoint(spec.base.registry).prefix}/{spec.base.repository}@{current}"
    ensure(engine, ref_by_digest, _line_sink(), pull_auth(spec, registries), release=spec.base.release_ref)
    result = resolve(spec, base, provided(engine, ref_by_digest, spec.base.python))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(result.render(spec), encoding="utf-8")
    count = sum(len(layer.packages) for layer in result.layers)
    info(
        f"wrote {state.repo.rel(path)} ({count} distributions in {len(result.layers)} layers; "
        f"the base provides {len(result.provided)})"
    )


@cli.command()
@ref_argument()
@click.option("--rebuild", is_flag=True, help="Build even if an image with the same inputs exists.")
@click.option("--no-cache", is_flag=True, help="Rebuild every step and layer (implies --rebuild).")
@json_option()
@pass_state
def build(state: State, ref: str, rebuild: bool, no_cache: bool, as_json: bool) -> None:
    """Build NAME:VERSION with the Docker engine (hermetic; skipped when inputs are unchanged).

    \b
    Examples:
      xpu-release build training-cpu-pytorch:25.03
      xpu-release build training-cpu-pytorch:25.03 --rebuild --json
    """
    from dataclasses import asdict

    from ..image.build import build_image
    from ..image.engine import Engine

    spec = state.repo.load_ref(ref)
    built = build_image(
        state.root,
        spec,
        state.registries(),
        Engine.connect(),
        rebuild=rebuild or no_cache,
        no_cache=no_cache,
        keep_layers=None,
        builder=state.builder,
        on_line=(live := _line_sink()),
    )
    live.close()
    if as_json:
        _emit_json(asdict(built))
        return
    verb = "up to date" if built.skipped else f"built in {built.seconds:.0f} s"
    click.echo(f"{built.ref} {verb}: {built.image_id} ({built.size / 1e6:.0f} MB)")


@cli.command("test")
@ref_argument()
@json_option()
@pass_state
def test_(state: State, ref: str, as_json: bool) -> None:
    """Smoke-test the built NAME:VERSION inside a throwaway container (testinfra).

    \b
    Examples:
      xpu-release test training-cpu-pytorch:25.03
    """
    from dataclasses import asdict

    from ..image.engine import Engine
    from ..image.smoke import smoke_test

    spec = state.repo.load_ref(ref)
    result = smoke_test(state.root, spec, Engine.connect(), on_line=(live := _line_sink()))
    live.close()
    if as_json:
        _emit_json(asdict(result))
        return
    click.echo(f"{spec.ref}: {result.passed} checks passed ({result.image_id})")


@cli.command()
@ref_argument()
@json_option()
@pass_state
def repro(state: State, ref: str, as_json: bool) -> None:
    """Build NAME:VERSION twice from scratch; exit 5 naming the layers and files that differ.

    \b
    Examples:
      xpu-release repro training-cpu-pytorch:25.03
    """
    from dataclasses import asdict

    from ..errors import BuildFailed
    from ..image.engine import Engine
    from ..image.repro import check

    spec = state.repo.load_ref(ref)
    engine, live = Engine.connect(), _line_sink()
    report = check(state.root, spec, state.registries(), engine, builder=state.builder, on_line=live)
    live.close()
    if as_json:
        _emit_json({**asdict(report), "same": report.same})
    elif report.same:
        click.echo(f"{spec.ref} is reproducible: both builds are {report.first} ({report.layers} layers)")
    if report.same:
        return
    lines = [f"{spec.ref} is not reproducible: {report.first} ≠ {report.second}"]
    for d in report.differing:
        lines.append(f"  layer {d.index}: {d.first[:19]} ≠ {d.second[:19]}")
        lines += [f"    {f}" for f in d.files]
    lines += [f"  config {c}" for c in report.config]
    raise BuildFailed("\n".join(lines))


@cli.command()
@ref_argument()
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["cyclonedx"]),
    default="cyclonedx",
    show_default=True,
    help="CycloneDX 1.6 JSON (SPDX is not written).",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE ('-': stdout).")
@pass_state
def sbom(state: State, ref: str, fmt: str, output: str | None) -> None:
    """The SBOM of the built NAME:VERSION: every Python distribution (the base's too), Debian
    package and artifact, and the base by digest. The very bytes publish attaches to the image.

    \b
    Examples:
      xpu-release sbom training-cpu-pytorch:25.03 -o sbom.cdx.json
    """

    from ..evidence.attest import Documents
    from ..image.engine import Engine

    spec = state.repo.load_ref(ref)
    engine = Engine.connect()
    image_id = engine.require_image(spec.ref).id
    document = Documents(repo=state.repo, spec=spec, engine=engine, builder=state.builder).make(
        "sbom", image_id, ""
    )
    if write_output(output, document.payload + b"\n" if output in (None, "-") else document.payload,
                    what="SBOM"):  # fmt: skip
        info(f"wrote {output} ({fmt}, {document.digest})")
