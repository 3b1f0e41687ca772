"""Commands on images in the engine: lock, profile, build, test, repro, sbom (the gate's scan: ``gating``)."""

from __future__ import annotations

import click

from .app import State, _emit_json, cli, json_option, pass_state, ref_argument
from .groups import Push
from .live import line_sink
from .output import info, write_output
from .platforms import chosen, platform_option

# --- build and test ------------------------------------------------------------------------


@cli.command()
@ref_argument()
@click.option(
    "--check",
    is_flag=True,
    help="Resolve no pins; exit 4 if the committed lock is stale or the base tag has moved.",
)
@click.option(
    "--upgrade",
    is_flag=True,
    help="Keep no earlier pin: every distribution the manifest does not pin takes its newest "
    "version the pins allow.",
)
@json_option("With --check: whether the lock is current, and its base digest, as JSON on stdout.")
@pass_state
def lock(state: State, ref: str, check: bool, upgrade: bool, as_json: bool) -> None:
    """Resolve NAME:VERSION's pip pins into images/<name>/<version>/requirements.lock (hashed),
    and pin the base image's tag to the digest it points at now.

    Like pip-compile, it keeps the versions the earlier lock chose (this version's own, else the
    one of the version it extends) wherever the manifest's pins still allow them, so a bump
    moves only its own layer; --upgrade resolves everything afresh.

    \b
    Examples:
      xpu-release lock training-cpu-pytorch:25.03
      xpu-release lock training-cpu-pytorch:25.04 --upgrade
      xpu-release lock training-cpu-pytorch:25.03 --check --json
    """
    from ..image.baseimage import current_digest
    from ..image.lock import check_base, load_locks, lock_path
    from ..image.relock import relock, write_lock

    spec = state.repo.load_ref(ref)
    path = lock_path(state.root, spec)
    if check:
        from ..errors import ReleaseError

        try:
            committed = load_locks(state.root, spec)
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
    from ..image.engine import Engine

    made = relock(state.root, spec, state.registries(), state.credentials(), engine=Engine.connect,
                  on_line=line_sink(), upgrade=upgrade)  # fmt: skip
    result = made.lock
    write_lock(state.root, spec, result)
    count = len(result.versions)
    each = [f"{len(lock.layers)} layers; the base provides {len(lock.provided)}"
            + (f" on {p}" if result.platformed else "") for p, lock in result.by_platform]  # fmt: skip
    info(f"wrote {state.repo.rel(path)} ({count} distributions in {'; '.join(each)})")
    if made.earlier:
        kept_from, where = made.earlier
        new = sorted(f"{n} {v}" for n, v in set(result.versions) - set(kept_from.versions))
        info(
            f"kept {count - len(new)} of {count} versions {where} chose"
            + (f"; new: {', '.join(new)}" if new else "")
            + " (--upgrade takes the newest of all)"
        )


@cli.command()
@ref_argument()
@click.option(
    "--check", is_flag=True, help="Record again; exit 1 if the committed profile names other files."
)
@json_option("The files recorded (and, with --check, whether the committed profile is current) as JSON.")
@pass_state
def profile(state: State, ref: str, check: bool, as_json: bool) -> None:
    """Record NAME:VERSION's prefetch profile: the files its workload opens first, from a run of
    the built image in the engine (its pip components imported as the smoke test imports them,
    then its evaluation's workload), into images/<name>/<version>/prefetch.txt beside the lock.

    An image whose image.yaml says `layers: estargz` writes these files first in each layer, so
    a lazy puller fetches them at once. The profile is an input of the image: build again after
    it changes. Review it as a lock.

    \b
    Examples:
      xpu-release profile training-cpu-pytorch:25.03
      xpu-release profile training-cpu-pytorch:25.03 --check
    """
    from ..image.engine import Engine
    from ..image.profile import committed, record, stale, write

    spec = state.repo.load_ref(ref)
    listed = committed(state.root, spec) if check else ()  # the file's problems before a run
    engine = Engine.connect()
    engine.require_image(spec.ref)
    made = record(state.root, spec, engine, spec.ref)
    rel = state.repo.rel(made.path)
    if check:
        stale(state.root, made, listed)
    changed = False if check else write(state.root, made)
    if as_json:
        _emit_json({"profile": rel, "files": list(made.files), "current": True, "written": changed})
    elif check:
        info(f"{rel} is current ({len(made.files)} files)")
    else:
        said = "wrote" if changed else "unchanged:"
        info(f"{said} {rel} ({len(made.files)} files the workload opened first)")


@cli.command()
@ref_argument()
@click.option("--rebuild", is_flag=True, help="Build even if an image with the same inputs exists.")
@click.option("--no-cache", is_flag=True, help="Rebuild every step and layer (implies --rebuild).")
@platform_option()
@json_option()
@pass_state
def build(state: State, ref: str, rebuild: bool, no_cache: bool, platform_names: tuple[str, ...],
          as_json: bool) -> None:  # fmt: skip
    """Build NAME:VERSION with the Docker engine (hermetic; skipped when inputs are unchanged):
    an image per platform the manifest declares (another architecture's under emulation), each
    tagged NAME:VERSION (linux/amd64) or NAME:VERSION-ARCH.

    \b
    Examples:
      xpu-release build training-cpu-pytorch:25.03
      xpu-release build training-cpu-pytorch:25.03 --rebuild --json
      xpu-release build training-cpu-pytorch:26.01 --platform linux/arm64
    """
    from dataclasses import asdict

    from ..image.build import Building, build_image
    from ..image.engine import Engine
    from ..image.inputs import BuildInputs

    spec = state.repo.load_ref(ref)
    registries = state.registries()
    platforms = chosen(spec, platform_names)
    engine, live = Engine.connect(), line_sink()
    made = []
    for inputs in BuildInputs.each(state.root, spec, registries):
        if inputs.platform not in platforms:
            continue
        how = Building(
            builder=state.builder, credentials=state.credentials(), rebuild=rebuild or no_cache,
            no_cache=no_cache, codec=Push().codec(state.settings),  # as `publish` will compress, unless told
        )  # fmt: skip
        made.append(build_image(state.root, inputs, registries, engine, how, live))
    live.close()
    if as_json:
        _emit_json(
            asdict(made[0])
            if not spec.platformed
            else {"ref": spec.ref, "platforms": list(map(asdict, made))}
        )
        return
    for built in made:
        verb = "up to date" if built.skipped else f"built in {built.seconds:.0f} s"
        on = f" ({built.platform})" if spec.platformed else ""
        click.echo(f"{built.ref}{on} {verb}: {built.image_id} ({built.size / 1e6:.0f} MB)")


@cli.command("test")
@ref_argument()
@platform_option()
@json_option()
@pass_state
def test_(state: State, ref: str, platform_names: tuple[str, ...], as_json: bool) -> None:
    """Smoke-test the built NAME:VERSION inside a throwaway container (testinfra): each
    platform's image in a container of its own (another architecture's under emulation).

    \b
    Examples:
      xpu-release test training-cpu-pytorch:25.03
      xpu-release test training-cpu-pytorch:26.01 --platform linux/arm64
    """
    from dataclasses import asdict

    from ..image.engine import Engine
    from ..image.lock import load_locks
    from ..image.smoke import smoke_test

    spec = state.repo.load_ref(ref)
    # The lock as it is: what the image was made from, which a later edit of the manifest (a
    # wrong pin under test) does not change.
    locks = load_locks(state.root, spec, current=False)
    engine, live = Engine.connect(), line_sink()
    results = []
    for platform in chosen(spec, platform_names):
        results.append(
            smoke_test(state.root, spec, locks.of(platform), engine, on_line=live, platform=platform)
        )
    live.close()
    if as_json:
        _emit_json(
            asdict(results[0])
            if not spec.platformed
            else {"ref": spec.ref, "platforms": list(map(asdict, results))}
        )
        return
    for result in results:
        click.echo(f"{result.ref}: {result.passed} checks passed ({result.image_id})")


@cli.command()
@ref_argument()
@platform_option(multiple=False)
@json_option()
@pass_state
def repro(state: State, ref: str, platform_names: str | None, as_json: bool) -> None:
    """Build NAME:VERSION twice from scratch; exit 5 naming the layers and files that differ.

    \b
    Examples:
      xpu-release repro training-cpu-pytorch:25.03
      xpu-release repro training-cpu-pytorch:26.01 --platform linux/arm64
    """
    from dataclasses import asdict

    from ..errors import BuildFailed
    from ..image.build import Building
    from ..image.engine import Engine
    from ..image.repro import check

    spec = state.repo.load_ref(ref)
    engine, live = Engine.connect(), line_sink()
    how = Building(builder=state.builder, credentials=state.credentials())
    report = check(state.root, spec, state.registries(), engine, how=how, on_line=live,
                   platform=chosen(spec, platform_names)[0])  # fmt: skip
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
    type=click.Choice(["cyclonedx", "spdx-json"]),
    default="cyclonedx",
    show_default=True,
    help="CycloneDX 1.6 JSON (what publish attaches), or SPDX 2.3 JSON made from it.",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE ('-': stdout).")
@platform_option(multiple=False)
@pass_state
def sbom(state: State, ref: str, fmt: str, output: str | None, platform_names: str | None) -> None:
    """The SBOM of the built NAME:VERSION: every Python distribution (the base's too), Debian
    package and artifact, and the base by digest. The very bytes publish attaches to the image;
    --format spdx-json gives the same facts as SPDX 2.3.

    \b
    Examples:
      xpu-release sbom training-cpu-pytorch:25.03 -o sbom.cdx.json
      xpu-release sbom training-cpu-pytorch:25.03 --format spdx-json -o sbom.spdx.json
    """
    from ..evidence.attachment import Attachment
    from ..evidence.attest import image_sbom
    from ..image.engine import Engine
    from ..image.lock import load_lock

    spec = state.repo.load_ref(ref)
    platform = chosen(spec, platform_names)[0]
    engine = Engine.connect()
    image_id = engine.require_image(platform.local_ref(spec.ref)).id
    made = image_sbom(state.repo, spec, load_lock(state.root, spec, platform=platform), engine, image_id)
    document = Attachment(kind="sbom", payload=made)
    if fmt == "spdx-json":
        from .. import __version__
        from ..evidence.spdx import to_spdx

        document = Attachment(kind="spdx", payload=to_spdx(document.payload, tool_version=__version__))
    if write_output(output, document.payload + b"\n" if output in (None, "-") else document.payload,
                    what="SBOM"):  # fmt: skip
        info(f"wrote {output} ({fmt}, {document.digest})")
