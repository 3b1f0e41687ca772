"""``mirror``: a published release, by digest, with every document that refers to it, copied to
another registry repository or an OCI layout directory, and back (``release/publishing/mirror.py``)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import click

from .app import State, _emit_json, cli, json_option, pass_state, ref_argument
from .groups import Login, with_login
from .live import line_sink


def _mirror_side(text: str, option: str, registries: Any, creds: Any, *, create: bool) -> Any:
    """``oci:DIR`` or ``HOST/REPOSITORY`` as one end of a mirror. A host the registries file
    names is reached as it says (TLS CA file, or plain HTTP on loopback); another by HTTPS."""
    import re

    from ..errors import ConfigError
    from ..guard.shown import shown
    from ..oci.channel import COPY, client_for
    from ..oci.endpoint import Endpoint, host_problem
    from ..oci.layout import Layout
    from ..release.publishing.sides import LayoutSide, RegistrySide

    if text.startswith("oci:"):
        folder = text.removeprefix("oci:")
        if not folder or ":" in folder:
            msg = f"{text!r}: name a directory, oci:DIR (the version is the release's)"
            raise click.BadParameter(msg, param_hint=option)
        layout = Layout(Path(folder))
        if not create or layout.exists():  # a target is made on the copy's first write
            layout.check()
        return LayoutSide(layout)
    host, _, path = text.partition("/")
    component = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
    if not host or "://" in text or not re.fullmatch(rf"{component}(?:/{component})*", path):
        msg = (
            f"{text!r}: name HOST/REPOSITORY (lower case, e.g. registry.example.com/team/training-cpu-"
            "pytorch) or oci:DIR; the version is the release's"
        )
        raise click.BadParameter(msg, param_hint=option)
    problem = host_problem(host)
    if problem is not None:
        msg = f"{option} {shown(text, 200)!r}: the host {shown(host, 100)!r} {problem}"
        raise ConfigError(msg)
    known = next((e for e in registries.publish_endpoints() if e.host == host), None)
    namespace = path.rpartition("/")[0]
    ep = Endpoint(registry="mirror", role="public", region=None, host=host, namespace=namespace,
                  insecure=bool(known and known.insecure), ca_file=known.ca_file if known else None,
                  token_hosts=known.token_hosts if known else ())  # fmt: skip
    return RegistrySide(client_for(ep, creds, COPY), path)


@cli.command()
@ref_argument()
@click.option(
    "--to",
    "target",
    required=True,
    metavar="oci:DIR|HOST/REPOSITORY",
    help="Where to copy the release: an OCI image layout directory, or a registry repository.",
)
@click.option(
    "--from",
    "source",
    metavar="oci:DIR|HOST/REPOSITORY",
    help="Where to copy it from (default: the release's first endpoint).",
)
@json_option()
@with_login
@pass_state
def mirror(
    state: State,
    ref: str,
    target: str,
    source: str | None,
    as_json: bool,
    login: Login,
) -> None:
    """Copy a published release, by digest, with every document that refers to it (SBOM,
    provenance, VEX, cosign's layouts) to another registry repository or an OCI layout
    directory, and back. Exit 9 when the target's version tag holds another image; a rerun
    skips what is there and intact (a damaged blob is copied again); every blob is hashed where
    it lands (exit 7 naming what is missing or damaged); a host that does not answer is exit 10.

    \b
    Examples:
      xpu-release mirror training-cpu-pytorch:25.03 --to oci:/media/usb/training-cpu-pytorch
      xpu-release mirror training-cpu-pytorch:25.03 --from oci:/media/usb/training-cpu-pytorch \\
          --to registry.region.example/ai/training-cpu-pytorch
    """
    from ..errors import NotFoundError, VerifyFailed
    from ..release.model.pool import EndpointPool, served_release
    from ..release.publishing.mirror import NothingAtTag
    from ..release.publishing.mirror import mirror as run_mirror
    from ..release.publishing.sides import RegistrySide

    spec = state.repo.load_ref(ref)
    registries = state.registries()
    creds = login.store(state.settings, registries)
    if source is None:  # the release as its endpoints serve it: one digest, read where it answers
        pool = EndpointPool(spec, registries, creds)
        nothing = f"no endpoint serves {spec.ref}: publish it first, or name the source with --from"
        found = served_release(pool, nothing=nothing).source
        assert found is not None  # asked of the endpoints, not of a record
        src = RegistrySide(pool.client(found[0]), pool.repo(found[0]))
    else:
        src = _mirror_side(source, "--from", registries, creds, create=False)
    dst = _mirror_side(target, "--to", registries, creds, create=True)
    try:
        with contextlib.closing(line_sink()) as live:  # lines, and meters of the bytes copied and checked
            report = run_mirror(src, dst, spec.version, state.settings.cache, on_line=live)
    except NothingAtTag as exc:
        hint = "publish it first, or name the source with --from" if source is None else (
            f"is {spec.version} the version it holds? (check --from)")  # fmt: skip
        msg = f"{exc.message}: {hint}"
        raise NotFoundError(msg) from None
    if as_json:
        from dataclasses import asdict

        _emit_json({**asdict(report), "ok": report.ok})
    elif report.ok:
        att = (f" ({', '.join(report.kinds)})" if report.kinds else "") + (
            ", cosign's .att" if report.att else ""
        )
        again = f", {report.blobs_replaced} found damaged and copied again" if report.blobs_replaced else ""
        click.echo(f"{spec.ref}: {report.digest} at {report.target} with {len(report.referrers)} "
                   f"referrers{att}; {report.blobs_copied} blobs copied ({report.bytes_copied / 1e6:.1f} "
                   f"MB), {report.blobs_skipped} present and intact{again}; every blob hashed where it "
                   "landed")  # fmt: skip
    if not report.ok:
        raise VerifyFailed("\n".join([f"{spec.ref}: the copy at {report.target} is incomplete:",
                                      *(f"  {p}" for p in report.problems)]))  # fmt: skip
