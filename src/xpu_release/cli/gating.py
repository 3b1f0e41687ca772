"""The vulnerability gate on an image in the engine: ``scan``, and the policy ``release`` and
``watch`` share (``groups.Checks``, ``advisories_option``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .app import State, _emit_json, cli, json_option, pass_state, ref_argument
from .groups import Checks, advisories_option
from .output import info, write_output
from .platforms import chosen, platform_option

if TYPE_CHECKING:
    pass

# --- the vulnerability gate ---------------------------------------------------------------------


@cli.command()
@ref_argument()
@advisories_option
@json_option("The findings as JSON on stdout.")
@click.option(
    "--sarif", "sarif_file", type=click.Path(dir_okay=False), help="Also write SARIF 2.1.0 to FILE."
)
@click.option("--today", metavar="DATE", help="Compare exceptions' review dates with DATE (default: today).")
@platform_option(multiple=False)
@pass_state
def scan(state: State, ref: str, advisories: tuple[str, ...], as_json: bool, sarif_file: str | None,
         today: str | None, platform_names: str | None) -> None:  # fmt: skip
    """The vulnerability gate on the built NAME:VERSION: its SBOM (the bytes publish attaches)
    against OSV advisories, offline, with the reviewed exceptions in
    images/<name>/vex.openvex.json. Exit 14 when a finding at or above the manifest's
    security.fail_on has no valid exception, or an exception is stale.

    \b
    Examples:
      xpu-release scan training-cpu-pytorch:25.03 --advisories osv/
      xpu-release scan training-cpu-pytorch:25.03 --json --sarif scan.sarif
    """
    from .. import __version__
    from ..errors import ConfigError, VulnerabilityGateFailed
    from ..evidence.attest import image_sbom
    from ..evidence.sarif import to_sarif
    from ..evidence.scan import gate_failure, scan_image, shown_finding
    from ..evidence.vex import published_at
    from ..image.engine import Engine
    from ..image.lock import load_lock

    gate = Checks(advisories=advisories).gate(state.settings, today)
    if not gate.advisories:
        msg = "no advisories: give --advisories PATH or set XPU_RELEASE_ADVISORIES (OSV records, offline)"
        raise ConfigError(msg)
    spec = state.repo.load_ref(ref)
    platform = chosen(spec, platform_names)[0]
    engine = Engine.connect()
    image_id = engine.require_image(platform.local_ref(spec.ref)).id
    sbom = image_sbom(state.repo, spec, load_lock(state.root, spec, platform=platform), engine, image_id)
    where = published_at(spec.image, state.registries().publish_endpoints())
    result = scan_image(state.repo, spec, sbom, gate, cache=state.settings.cache, repositories=where)
    if sarif_file is not None:
        sarif = to_sarif(result, manifest=spec.manifest_path, version=__version__)
        if write_output(sarif_file, sarif, what="SARIF"):
            info(f"wrote {sarif_file}")
    if as_json:
        _emit_json(result.to_json())
    else:
        click.echo(f"{spec.ref}: {len(result.findings)} findings in {result.packages} packages "
                   f"(threshold {result.threshold})")  # fmt: skip
        for f in result.findings:
            vex = f" [VEX {f.exception.status}, {f.exception.where}]" if f.exception else ""
            vid, name, version, fixed = shown_finding(f)
            mark = "BLOCKS" if f.blocking else ""
            click.echo(
                f"  {f.level:<8} {vid:<22} {name} {version} (fixed: {fixed or '-'}){vex} {mark}".rstrip()
            )
    if not result.passed:
        raise VulnerabilityGateFailed(gate_failure(result))
