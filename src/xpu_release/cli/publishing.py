"""Commands that publish and check releases at the endpoints: publish, verify, status (mirror:
``mirroring.py``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..guard.shown import shown
from .app import State, _emit_json, cli, json_option, pass_state, ref_argument
from .groups import Login, Push, publish_push_options, with_login
from .housekeeping import cache_limit, cap_cache
from .lifecycle import standing, withdrawn_words
from .live import line_sink
from .output import aligned, info, notice, paint, print_plan

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..image.engine import Engine
    from ..manifest import ImageSpec
    from ..progress import Sink
    from ..release.model.pool import EndpointPool
    from ..release.model.record import ReleaseRecord
    from ..release.publishing.publish import Options

# --- publish -----------------------------------------------------------------------------


@cli.command()
@ref_argument()
@click.option("--dry-run", is_flag=True, help="Print the plan; touch nothing.")
@click.option("--record", "record_file", type=click.Path(dir_okay=False), help="Where to write the record.")
@publish_push_options
@json_option()
@with_login
@pass_state
def publish(state: State, ref: str, dry_run: bool, record_file: str | None, push: Push, as_json: bool,
            login: Login) -> None:  # fmt: skip
    """Publish the tested NAME:VERSION to the public registry and every VPC region, verified.

    \b
    Examples:
      xpu-release publish training-cpu-pytorch:25.03 --dry-run
      xpu-release publish training-cpu-pytorch:25.03 --signing-key key.pem
    """
    from ..errors import PublishError
    from ..oci.channel import ASKING
    from ..release.model import record as records
    from ..release.model.line import Line, newer_version
    from ..release.model.plan import make_plan
    from ..release.model.pool import EndpointPool
    from ..release.publishing.publish import Options, failure_report

    spec = state.repo.load_ref(ref)
    registries = state.registries()
    codec = push.codec(state.settings)  # a refused codec fails a dry run too
    creds = login.store(state.settings, registries)
    if dry_run:  # the tags the publish would move: the line rule, withdrawals asked as the publish will
        moving = Line(state.repo).planned(EndpointPool(spec, registries, creds, ASKING))
        plan = make_plan(spec, registries, newer=newer_version(state.repo, spec), moves=moving.moves)
        if as_json:
            _emit_json({**plan.to_json(), "dry_run": True, "withdrawals_unasked": moving.unasked})
            return
        print_plan(plan, f"would publish {spec.ref} (dry run: nothing is touched)")
        if moving.unasked:
            alone = "the floating tags by the manifests alone; the withdrawals could not be asked"
            notice(f"{alone}: {moving.unasked}")
        return

    from ..image.engine import Engine
    from ..image.render import image_layers

    limit = cache_limit(state)
    options = Options(
        allow_overwrite=push.allow_overwrite,
        line=Line(state.repo),  # the floating tags: the line rule, asked when they move
        chunk_size=push.chunk_size,
        engine_push=push.engine_push,
        signer=push.signer(state.settings),
        codec=codec,
        form=image_layers(state.root, spec),  # an eStargz image's layers are the ones it was tested with
    )
    path = Path(record_file) if record_file else records.default_path(state.root, spec.image, spec.version)
    records.writable(path, spec.ref, state.root)  # before any endpoint is changed
    engine = Engine.connect()
    pushing = _tested(state, spec, engine)  # before any endpoint is asked: untested is not published
    pool = EndpointPool(spec, registries, creds, on_line=(live := line_sink()))
    result = pushing(pool, options, live)
    live.close()
    written = records.keep(result, path, state.root)
    if as_json:
        _emit_json(result.to_json())
    else:
        print_record(result)
        info(f"record: {written}")
        if written != path:
            info(f"(the record at {path} says more is done and is kept as it was)")
    if not result.complete:
        raise PublishError(failure_report(result))
    if standing(spec).end is None and result.digest:
        _dates_still_stated(pool, spec.ref, result.digest)
    cap_cache(state, limit)


def print_record(record: ReleaseRecord) -> None:
    """What a publish did at each endpoint (and, of an index, each platform's image), then the
    floating tags it moved."""
    click.echo(f"{record.ref}  {record.digest or '(no digest)'}")
    for e in record.endpoints:
        detail = (
            e.error
            or f"{e.seconds:.1f} s, {e.uploaded_bytes / 1e6:.1f} MB up, {e.skipped_blobs} blobs present"
        )
        click.echo(f"  {e.endpoint:<22} {e.status:<10} {e.version_ref}  ({detail})")
    for pl in record.platforms:  # a platformed release: the images its index names
        click.echo(f"  {pl.platform:<22} {pl.digest or '(not pushed)'}  ({pl.size / 1e6:.1f} MB)")
    for ref in record.floating_moved:
        click.echo(f"  moved {ref}")


def _tested(
    state: State, spec: ImageSpec, engine: Engine
) -> Callable[[EndpointPool, Options, Sink], ReleaseRecord]:
    """What publish pushes, found in the engine and checked tested before the SBOM is made: of a
    platformed release every declared platform's image (published as one index, or nothing),
    else the one image; called with the run's pool, options and live line, it publishes."""
    from ..evidence.attest import Documents, image_sbom
    from ..image.lock import load_lock
    from ..image.smoke import require_tested
    from ..labels import INPUTS_LABEL
    from ..release.publishing.indexpublish import platform_builds, publish_index
    from ..release.publishing.publish import publish as run_publish

    if spec.platformed:
        builds = platform_builds(state.repo, spec, engine, state.builder)
        return lambda pool, options, live: publish_index(pool, engine, builds, options, live, state.builder)
    image = engine.require_image(spec.ref)
    require_tested(spec, image.id)
    lock = load_lock(state.root, spec)
    documents = Documents(repo=state.repo, spec=spec, lock=lock, image_id=image.id, builder=state.builder,
                          sbom=image_sbom(state.repo, spec, lock, engine, image.id))  # fmt: skip
    inputs = image.labels.get(INPUTS_LABEL, "")
    return lambda pool, options, live: run_publish(pool, engine, image.id, inputs, options, live, documents)


def _dates_still_stated(pool: EndpointPool, ref: str, digest: str) -> None:
    """A support date taken out of the manifest stays stated at the registries (a lifecycle
    document is never deleted): said loudly, with what to do, never quietly (also with -q)."""
    from ..release.publishing.documents import dates_still_stated

    stated = dates_still_stated(pool, digest)
    if stated:
        where = "; ".join(f"{name}: {dates}" for name, dates in stated.items())
        warning = paint("warning:", "yellow", stream=sys.stderr)
        click.echo(f"{warning} {ref} has no support date in its manifest, "
                   f"but its lifecycle document still states an end of life at the registries ({where}): "
                   "nothing is deleted, and tools that read it (oras discover, scanners) say so. Give "
                   "`support: until:` the date you mean and rerun publish to state that one instead.",
                   err=True)  # fmt: skip


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
    login: Login,
) -> None:
    """Check that every endpoint serves NAME:VERSION blob for blob (exit 7 naming what is wrong).

    Without --deep: the version tag names the recorded manifest and every blob exists with its
    size. With --deep: every blob is downloaded and hashed, at every endpoint, and each eStargz
    layer is held against its TOC (offsets, chunk digests, entries) as it passes.

    \b
    Examples:
      xpu-release verify training-cpu-pytorch:25.03 --deep
      xpu-release verify training-cpu-pytorch:25.03 --key key.pub
    """
    from dataclasses import asdict

    from ..errors import VerifyFailed
    from ..evidence.signing import load_verifier
    from ..oci.channel import VERIFYING
    from ..release.model import record as records
    from ..release.model.pool import EndpointPool
    from ..release.publishing.verify import verify as run_verify

    spec = state.repo.load_ref(ref)
    path = Path(record_file) if record_file else records.default_path(state.root, spec.image, spec.version)
    record = records.of_release(path, spec.ref)
    creds = login.store(state.settings, state.registries())
    if record is None:  # what is checked then is that the endpoints agree, not what was released
        said = "each endpoint is held against the others (what their version tags serve), not a release"
        notice(f"no release record at {state.repo.rel(path)}: {said}; --record FILE names one")
    expected = record.digest if record else None
    attached = (record.attachments or None) if record else None
    key = load_verifier(key_file) if key_file else None
    pool = EndpointPool(spec, state.registries(), creds, VERIFYING)
    platforms = {p.platform: p.attachments for p in record.platforms} if record else None
    report = run_verify(pool, expected, deep=deep, attachments=attached, key=key,
                        on_line=(live := line_sink()), platforms=platforms)  # fmt: skip
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
    for words in report.withdrawn:  # not a failure: the release is served, and says so
        click.echo(f"{spec.ref}: {words}")
    if not report.ok:
        lines = [f"{spec.ref}: {len(report.findings)} problems:"]
        lines += [f"  {f.endpoint:<22} {f.what}: {f.problem}" for f in report.findings]
        if all(f.down for f in report.findings) and len(report.findings) >= report.endpoints:
            from ..errors import StackError

            raise StackError("\n".join([f"{spec.ref}: no endpoint answers (retry later):", *lines[1:]]))
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
    login: Login,
) -> None:
    """What every endpoint serves now for NAME:VERSION, against its release record, and its
    security state as the latest `watch` found it.

    \b
    Examples:
      xpu-release status training-cpu-pytorch:25.03
      xpu-release status training-cpu-pytorch:25.03 --catalog --json
    """
    from ..oci.channel import ASKING
    from ..release.model import record as records
    from ..release.model.pool import EndpointPool
    from ..release.model.serving import catalog as tag_catalog
    from ..release.model.serving import raise_answers, raise_status
    from ..release.model.serving import status as endpoint_status

    spec = state.repo.load_ref(ref)
    registries = state.registries()
    pool = EndpointPool(spec, registries, login.store(state.settings, registries), ASKING)
    if catalog:
        entries = tag_catalog(pool)
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
                    else shown(f"{e.endpoint}: {_MARKS[e.error_kind or 'unreachable']} {e.error}", 100)
                )
                for tag, digest in e.tags:
                    click.echo(f"  {tag:<16} {digest}")
        raise_answers([(e.endpoint, e.error, e.error_kind) for e in entries])
        return
    path = Path(record_file) if record_file else records.default_path(state.root, spec.image, spec.version)
    record = records.of_release(path, spec.ref)
    rows = endpoint_status(pool, record)
    from ..release.model.history import describe, security

    watched = security(state.root, spec.image, spec.version)
    if as_json:
        _emit_json({"record": str(path) if record else None, "support": standing(spec).to_json(),
                    "endpoints": [r.to_json() for r in rows], "security": watched})  # fmt: skip
    else:
        table = [("endpoint", "state", "tag", "attached", "serves")]
        for r in rows:
            mark = "ok" if r.matches else ("-" if record is None else "DIFFERS")
            if r.error:
                mark = _MARKS[r.error_kind or "unreachable"]
            docs = _documents_words(r.documents) if r.tag == spec.version and r.serves else ""
            table.append((r.endpoint, mark, r.tag, docs, r.serves or r.error or "absent"))
            for pl in r.platforms:  # a platformed release: each image its index names
                there = "ok" if pl.served else ("ABSENT" if pl.digest else "MISSING")
                own = _documents_words(pl.documents)
                table.append(("", there, pl.platform, own, pl.digest or "not in the index"))
        for line in aligned(table):  # each error is said whole on stderr
            click.echo(line)
        click.echo(f"{spec.ref}: {standing(spec).words()}" + "".join(withdrawn_words(rows)))
        click.echo(f"security: {describe(watched) if watched else 'not watched yet (xpu-release watch)'}")
    raise_status(rows, record, path, spec.version)


def _documents_words(documents: tuple[tuple[str, str], ...]) -> str:
    """``sbom+prov``, each not ok with its state: ``prov(unsigned)``; none: ``none``."""
    return "+".join(k[:4] if s == "ok" else f"{k[:4]}({s})" for k, s in documents) or "none"


_MARKS = {"auth": "AUTH", "unreachable": "DOWN", "protocol": "WRONG"}  # a row's state, by error kind
