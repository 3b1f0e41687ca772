"""``build``: turn a rendered Dockerfile, its lock and its artifacts into an image.

Hermetic: wheels and artifacts are fetched and verified on the host, then installed from the
build context by build containers that have no network. Content-addressed: the image carries
the sha256 of its inputs, and a build whose inputs already exist as an image is skipped.
Reproducible: the base is the lock's digest, and what the classic builder made is normalized
(``normalize.py``) into an image whose id depends on the inputs alone, never on the build's
time or place: the same manifest, lock and base digest give the same image id on any runner.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..errors import OutputError
from ..guard.trees import remove_tree
from ..labels import BASE_DIGEST_LABEL, INPUTS_LABEL, MANIFEST_LABEL
from ..manifest import ImageSpec
from ..manifest.platforms import Platform
from ..manifest.registries import Registries
from ..manifest.support import calver_month
from ..oci.codec import Codec
from ..oci.credentials import CredentialStore
from ..oci.store import ObservedMap
from ..settings import cache_folder, current
from . import baseimage, fetch, stages
from .engine import Engine, LineSink
from .inputs import BuildInputs, require_pinned
from .lock import Lock
from .normalize import Normalized, Normalizing, iso, normalize
from .workload import carried

RAW_REPOSITORY = "xpu-release-build"  # what the classic builder made, kept as the build cache


def source_date_epoch(spec: ImageSpec) -> int:
    """The release's SOURCE_DATE_EPOCH: the config's ``created``, its history times and the
    ``org.opencontainers.image.created`` label. (File mtimes are clamped to one fixed moment
    instead, ``layers.MTIME_EPOCH``, so an unchanged layer stays the same blob across releases.)

    It is a fact of the manifest, so every runner agrees on it: a calendar version ``YY.MM``
    (25.03) is the first second of that month in UTC; any other version is 0 (1970-01-01)."""
    month = calver_month(spec.version)
    if month is None:
        return 0
    return int(datetime(month.year, month.month, 1, tzinfo=UTC).timestamp())


@dataclass(frozen=True, kw_only=True)
class BuiltImage:
    ref: str  # the local tag: NAME:VERSION (linux/amd64), NAME:VERSION-arm64 (``Platform.local_ref``)
    image_id: str
    inputs_sha256: str
    manifest_sha256: str
    size: int
    skipped: bool
    seconds: float
    layers_rewritten: int = 0
    layers_reused: int = 0
    layers_exported: int = 0  # of the rewritten, those read out of the whole image's export
    platform: str = "linux/amd64"  # what the image is built for (its config says so)


@dataclass(frozen=True, kw_only=True)
class BuildRun:
    """When and by whom an image was built: facts of one build, kept by image id."""

    builder: str
    started: str
    finished: str


def remember_build(image_id: str, builder: str, started: float, finished: float) -> None:
    run = {"builder": builder, "started": _utc(started), "finished": _utc(finished)}
    ObservedMap("builds").put(image_id, json.dumps(run, sort_keys=True))


def known_build(image_id: str) -> BuildRun | None:
    text = ObservedMap("builds").get(image_id)
    if not text:
        return None
    try:
        data = json.loads(text)
        return BuildRun(builder=str(data["builder"]), started=str(data["started"]),
                        finished=str(data["finished"]))  # fmt: skip
    except (ValueError, KeyError, TypeError):
        return None


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _assemble_context(root: Path, spec: ImageSpec, dockerfile: str, lock: Lock, platform: Platform) -> Path:
    """The build context: Dockerfile, one wheel folder per pip layer, one folder per artifact, and the
    workload the image carries (a folder per platform: each has its own wheels)."""
    suffix = f"-{platform.slug}" if spec.platformed else ""
    ctx = cache_folder("contexts") / f"{spec.image}-{spec.version}{suffix}"
    # An earlier run's context, or whatever else is at its name (a link is removed, never
    # followed; a tree of any depth is removed without recursion).
    if not remove_tree(ctx):
        msg = f"{ctx}: an earlier build context cannot be removed (no permission, or too deep); remove it"
        raise OutputError(msg)
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(dockerfile, encoding="utf-8")
    (ctx / "pip-constraints.txt").write_text(lock.constraints(), encoding="utf-8")
    for layer in lock.layers:
        folder = ctx / "wheels" / layer.component
        folder.mkdir(parents=True)
        (folder / "requirements.txt").write_text(lock.requirements(layer), encoding="utf-8")
        for p in layer.packages:
            wheel = fetch.fetch(p.url, p.sha256, p.filename, pip_fallback=f"{p.name}=={p.version}")
            fetch.link_or_copy(wheel, folder / p.filename)
    workload = carried(spec)
    if workload is not None:  # executable, as COPY keeps a file's mode
        (ctx / workload.context_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(workload.source, ctx / workload.context_path)
        (ctx / workload.context_path).chmod(0o755)
    token = current().artifact_token  # XPU_RELEASE_ARTIFACT_TOKEN, as the settings read it
    for c in spec.of_kind("artifact"):
        assert c.url is not None
        assert c.sha256 is not None
        blob = fetch.fetch(c.url, c.sha256, f"{c.id}.{c.format}", token=token)
        fetch.link_or_copy(blob, ctx / "artifacts" / c.id / f"{c.id}.{c.format}")
    return ctx


@dataclass(frozen=True, kw_only=True)
class Building:
    """How ``build_image`` builds. ``builder``: who builds, kept with the image id for its
    provenance; ``rebuild``: even when an image of the same inputs exists; ``no_cache``: every
    step and layer made again; ``keep_layers``: a folder to keep the layers above the base in
    (``repro``); ``codec``: the layers it writes are compressed into the publish spool with it,
    for the push to find (None: left to the push); ``credentials``: the command's, for pulling
    the base (``baseimage.pull_auth``)."""

    builder: str
    credentials: CredentialStore
    rebuild: bool = False
    no_cache: bool = False
    keep_layers: Path | None = None
    codec: Codec | None = None


def build_image(
    root: Path, inputs: BuildInputs, registries: Registries, engine: Engine, how: Building, on_line: LineSink
) -> BuiltImage:
    """Build the image of ``inputs`` as ``how`` says (skipped when an image of the same inputs
    exists, unless ``how.rebuild``)."""
    rebuild, no_cache, keep_layers, codec = how.rebuild, how.no_cache, how.keep_layers, how.codec
    started = time.monotonic()
    wall_started = time.time()
    spec, lock, platform, ref = inputs.spec, inputs.lock, inputs.platform, inputs.ref
    require_pinned(spec)
    existing = engine.image(ref)
    if existing and existing.labels.get(INPUTS_LABEL) == inputs.digest and not rebuild:
        up_to_date = f"{ref} is up to date ({existing.id[:19]}, inputs {inputs.digest[:12]})"
        on_line(f"{up_to_date}; skipping the build")
        return BuiltImage(
            ref=ref,
            platform=platform.name,
            image_id=existing.id,
            inputs_sha256=inputs.digest,
            manifest_sha256=spec.content_hash,
            size=existing.size,
            skipped=True,
            seconds=time.monotonic() - started,
        )

    base_ref = baseimage.pinned_ref(spec, registries, lock)
    auth = baseimage.pull_auth(spec, registries, how.credentials)
    base_layers = baseimage.ensure(engine, base_ref, on_line, auth, release=spec.base.release_ref)
    context = _assemble_context(root, spec, inputs.dockerfile.text, lock, platform)
    epoch = source_date_epoch(spec)
    # Nothing of the build's time or place: no clock, no git revision or remote, no host name.
    # The revision a release was built from is in its record, not in the image.
    labels = {
        "org.opencontainers.image.title": spec.image,
        "org.opencontainers.image.version": spec.version,
        "org.opencontainers.image.created": iso(epoch),
        "org.opencontainers.image.base.name": f"{spec.base.repository}:{spec.base.tag}",
        BASE_DIGEST_LABEL: lock.base_digest,
        MANIFEST_LABEL: spec.content_hash,
        INPUTS_LABEL: inputs.digest,
    }
    raw_tag = f"{RAW_REPOSITORY}/{platform.local_ref(f'{spec.image}:{spec.version}')}"
    log: list[str] = []

    def logged(line: str) -> None:
        log.append(line)
        on_line(line)

    raw_id = engine.build(
        context=context,
        tag=raw_tag,
        buildargs={"BASE_IMAGE": base_ref},
        labels=labels,
        on_line=logged,
        nocache=no_cache,
        name=ref if not spec.platformed else f"{spec.ref} for {platform}",
    )
    shutil.rmtree(context, ignore_errors=True)
    assembling = Normalizing(
        base_layers=base_layers, epoch=epoch, tag=ref, stage_layers=_stage_layers(engine, raw_id, log),
        keep_layers=keep_layers, rewrite_all=no_cache, codec=codec, platform=platform, form=inputs.form,
    )  # fmt: skip
    made: Normalized = normalize(engine, raw_id, assembling, on_line)
    image_id = made.image_id
    remember_build(image_id, how.builder, wall_started, time.time())
    info = engine.require_image(image_id)
    return BuiltImage(
        ref=ref,
        platform=platform.name,
        image_id=image_id,
        inputs_sha256=inputs.digest,
        manifest_sha256=spec.content_hash,
        size=info.size,
        skipped=False,
        seconds=time.monotonic() - started,
        layers_rewritten=made.rewritten,
        layers_reused=made.reused,
        layers_exported=made.exported,
    )


def _stage_layers(engine: Engine, raw_id: str, log: list[str]) -> dict[str, str]:
    """Which layers of ``raw_id`` its build log shows copied from a stage's ``/out``."""
    built = stages.read_log(log)
    if not built.start:
        return {}
    diff_ids = list((engine.inspect_raw(raw_id).get("RootFS") or {}).get("Layers") or ())
    start_layers = len((engine.inspect_raw(built.start).get("RootFS") or {}).get("Layers") or ())
    return stages.layer_stages(built, diff_ids, start_layers)
