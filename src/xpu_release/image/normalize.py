"""Turn what the classic builder made into the reproducible image that is tested and published.

The classic builder stamps every image with its moment and place: the config's ``created`` and
history times, the id of the last build container, the engine's version, and layers whose files
carry the build's mtimes. ``normalize`` takes the built image apart and assembles the image the
release really is:

- the base's layers as they are (pinned by digest, so already fixed);
- every layer above them rewritten by ``layers.normalize_layer`` (sorted, mtimes clamped to one
  fixed moment that no release changes, no bytecode, no owner names);
- a config with ``created`` and every history time at the release's SOURCE_DATE_EPOCH, its
  platform (``os``, ``architecture``, ``variant``) the one the image is built for, and nothing
  of the build container or the engine. (An engine reports its own architecture for whatever it
  built under emulation, and Docker 20.10 ignores ``--platform`` on import: the platform is
  ours to say, never the engine's.)

Its id, the sha256 of that config, is then a pure function of the manifest, the lock and the
base digest. It is loaded into the engine with ``docker load``; layers the engine already holds
(the same chain) are not sent again, and a layer rewritten once is not rewritten again: the
raw → normalized diff_id map is kept in the cache (it is a pure function as well).

Given the codec the push will use, each layer rewritten here is also compressed into the publish
spool while its file is at hand (``oci.members``): the push then finds its blob by diff_id and
never exports the image from the engine again (which streams all of it, whatever is new).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import tempfile
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import BuildFailed
from ..manifest.platforms import AMD64, Platform
from ..oci.codec import Codec
from ..oci.members import spool_estargz, spool_layer
from ..oci.store import DigestMap, canonical_json, remember_config
from ..settings import cache_dir
from . import layers, stages
from .engine import Engine, LineSink
from .export import layer_sizes, save_layers
from .layerform import GZIP, LayerForm

_COPY_HASH = re.compile(r"\b(dir|file|multi):[0-9a-f]{64}")
# The config keys an image keeps; the rest (container, container_config, docker_version, ...)
# describe the build, not the image.
_KEPT = ("architecture", "os", "variant", "os.version", "os.features")
_KEPT_CONFIG = (
    "User", "ExposedPorts", "Env", "Entrypoint", "Cmd", "Volumes", "WorkingDir", "Labels",
    "StopSignal", "Shell", "Healthcheck", "OnBuild", "ArgsEscaped",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Normalized:
    image_id: str  # sha256 of the normalized config
    rewritten: int  # layers whose content was rewritten in this run
    reused: int  # layers known from the cache or already in the engine
    exported: int  # of the rewritten, those read out of the image's export (not from a stage)


def iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def chain_ids(diff_ids: Iterable[str]) -> list[str]:
    """The OCI chain ids of a layer stack: how an engine names "these layers, in this order"."""
    out: list[str] = []
    for d in diff_ids:
        out.append(d if not out else "sha256:" + hashlib.sha256(f"{out[-1]} {d}".encode()).hexdigest())
    return out


def normalized_config(
    raw: dict[str, Any], diff_ids: list[str], epoch: int, platform: Platform = AMD64
) -> dict[str, Any]:
    """The config of the reproducible image: only what describes the image, times at the epoch,
    and ``platform`` as its platform, whatever the engine said."""
    out: dict[str, Any] = {
        k: raw[k] for k in _KEPT if k in raw and k not in ("architecture", "os", "variant")
    }
    out |= {"architecture": platform.architecture, "os": platform.os}
    if platform.variant:
        out["variant"] = platform.variant
    out["created"] = iso(epoch)
    cfg = raw.get("config") or {}
    out["config"] = {k: cfg[k] for k in _KEPT_CONFIG if cfg.get(k) not in (None, "", [], {})}
    history = []
    for h in raw.get("history") or ():
        entry: dict[str, Any] = {"created": iso(epoch)}
        if h.get("created_by"):
            entry["created_by"] = _COPY_HASH.sub(r"\1:-", str(h["created_by"]))
        if h.get("comment"):
            entry["comment"] = h["comment"]
        if h.get("empty_layer"):
            entry["empty_layer"] = True
        history.append(entry)
    out["history"] = history
    out["rootfs"] = {"type": "layers", "diff_ids": diff_ids}
    return out


def config_bytes(config: dict[str, Any]) -> bytes:
    return canonical_json(config)


def _layer_map(form: LayerForm) -> DigestMap:
    """raw diff_id → normalized diff_id, for one set of rules and one form of layer (a pure
    function: kept)."""
    suffix = "" if not form.estargz else f"-{form.key}"
    return DigestMap(f"normalized-layers/v{layers.RULES_VERSION}-{layers.MTIME_EPOCH}{suffix}")


def _engine_chains(engine: Engine) -> set[str]:
    """Chain ids of every image the engine holds (so their layers need not be loaded again)."""
    chains: set[str] = set()
    for image in engine.api.images(all=False):
        try:
            attrs = engine.inspect_raw(image["Id"])
        except Exception:  # an image removed meanwhile
            continue
        chains.update(chain_ids((attrs.get("RootFS") or {}).get("Layers") or ()))
    return chains


def engine_config(attrs: dict[str, Any], history: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What ``normalized_config`` reads of an image's config, from the engine's inspect answer
    (``attrs``) and its history, oldest first (no export). A history entry made no layer when it
    reports no size; an entry that made a layer of no size (a step that changed no file) would
    make that ambiguous: then None, and the config is read out of the export."""
    if not _sizes_match(attrs, history):
        return None
    fields = {"architecture": "Architecture", "os": "Os", "variant": "Variant", "os.version": "OsVersion"}
    out: dict[str, Any] = {key: attrs[name] for key, name in fields.items() if attrs.get(name)}
    out["config"] = attrs.get("Config") or {}
    out["history"] = [
        {"created_by": h.get("CreatedBy") or "", "comment": h.get("Comment") or "",
         "empty_layer": not h.get("Size")}
        for h in history
    ]  # fmt: skip
    return out


def content_sizes(attrs: dict[str, Any], history: list[dict[str, Any]]) -> dict[str, int]:
    """diff_id → the size the engine reports for the layer's content (the sum of its files' and
    symbolic links' sizes, a hard-linked file once); empty when the history is ambiguous."""
    if not _sizes_match(attrs, history):
        return {}
    sizes = [int(h["Size"]) for h in history if h.get("Size")]
    return dict(zip(_layers(attrs), sizes, strict=True))


def _layers(attrs: dict[str, Any]) -> list[str]:
    return list((attrs.get("RootFS") or {}).get("Layers") or ())


def _sizes_match(attrs: dict[str, Any], history: list[dict[str, Any]]) -> bool:
    return sum(1 for h in history if h.get("Size")) == len(_layers(attrs))


@dataclass(frozen=True, kw_only=True)
class Normalizing:
    """How ``normalize`` assembles the reproducible image of a build.

    ``base_layers``: how many of the bottom layers are the pinned base's, kept as they are.
    ``epoch``: the moment every file and the config are clamped to. ``tag``: the name it is
    loaded under. ``stage_layers``: raw diff_id → the stage image whose ``/out`` that layer
    copied (``stages.layer_stages``); such a layer is read from there, the others out of the
    image's export, which then streams the whole image. ``keep_layers``: a folder to keep every
    layer above the base in, as ``<diff_id hex>.tar`` (to compare two builds). With it, or
    ``rewrite_all``, every layer is rewritten, none is taken from the cache. ``codec``: compress
    each rewritten layer into the publish spool with it (None: leave that to the push).
    ``platform``: what the config says the image is for (``normalized_config``). ``form``: an
    eStargz form writes each rewritten layer as eStargz (its tar loaded, its blob spooled with
    the form's codec, whatever ``codec`` says)."""

    base_layers: int
    epoch: int
    tag: str
    stage_layers: Mapping[str, str] = field(default_factory=dict)
    keep_layers: Path | None = None
    rewrite_all: bool = False
    codec: Codec | None = None
    platform: Platform = AMD64
    form: LayerForm = GZIP


def normalize(engine: Engine, raw_id: str, how: Normalizing, on_line: LineSink) -> Normalized:
    """Assemble and load the reproducible image of the built ``raw_id`` as ``how`` says; tag it
    ``how.tag``."""
    base_layers, keep_layers, codec, form, tag = (
        how.base_layers,
        how.keep_layers,
        how.codec,
        how.form,
        how.tag,
    )
    raw = engine.inspect_raw(raw_id)
    raw_diffs: list[str] = list((raw.get("RootFS") or {}).get("Layers") or ())
    mapping = _layer_map(form)
    fresh = how.rewrite_all or keep_layers is not None
    known = {} if fresh else {d: mapping.digest(d) for d in raw_diffs[base_layers:]}
    present = _engine_chains(engine)

    # A layer's content is needed if we do not know its normalized diff_id, or if the engine
    # lacks its chain (then docker load must be given the bytes); after the first such layer,
    # every chain above it is new too.
    need: set[str] = set()
    chains = chain_ids(raw_diffs[:base_layers])
    for raw_d in raw_diffs[base_layers:]:
        norm_d = known.get(raw_d)
        if norm_d is None or need:
            need.add(raw_d)
            continue
        parent = chains[-1] if chains else ""
        chains.append(norm_d if not parent else chain_ids([parent, norm_d])[-1])
        if chains[-1] not in present:
            need.add(raw_d)

    with tempfile.TemporaryDirectory(prefix="xpu-normalize-", dir=cache_dir()) as tmp_name:
        tmp = Path(tmp_name)
        files: dict[str, Path] = {}
        raw_layers = _read_layers(engine, raw_id, need, tmp, raw_diffs, dict(how.stage_layers))
        if need:
            on_line(
                f"normalizing {len(need)} of {len(raw_diffs) - base_layers} layers "
                f"({raw_layers.from_stages} read from their stages, {len(need) - raw_layers.from_stages} "
                "from the image's export)"
            )
        with ThreadPoolExecutor(max_workers=2) as pool:  # a layer's members on both cores
            for raw_d, path in raw_layers.files.items():
                norm, dest = _rewritten(
                    path, (keep_layers or tmp) / f"layer-{raw_d.split(':')[1][:16]}", form, pool
                )
                if keep_layers is not None:
                    dest = dest.replace(keep_layers / f"{norm.split(':')[1]}.tar")
                mapping.put(raw_d, norm)
                layer_sizes().put(norm, str(dest.stat().st_size))
                known[raw_d] = norm
                files[norm] = dest
            if codec is not None and not form.estargz:
                for norm, dest in files.items():
                    spool_layer(dest, norm, codec, pool)
        diff_ids = [*raw_diffs[:base_layers], *(str(known[d]) for d in raw_diffs[base_layers:])]
        config = config_bytes(normalized_config(raw_layers.config, diff_ids, how.epoch, how.platform))
        image_id = remember_config(config)
        load_image(engine, tmp, config, diff_ids, files, tag)
    loaded = engine.require_image(tag)
    if loaded.id != image_id:
        msg = f"the engine loaded {tag} as {loaded.id}, not the assembled {image_id}"
        raise BuildFailed(msg)
    return Normalized(
        image_id=image_id,
        rewritten=len(need),
        reused=len(raw_diffs) - base_layers - len(need),
        exported=len(need) - raw_layers.from_stages,
    )


def _rewritten(raw: Path, stem: Path, form: LayerForm, pool: ThreadPoolExecutor) -> tuple[str, Path]:
    """The normalized layer of the tar ``raw`` (removed): its diff_id and its file, ``stem``
    with ``.tar``; of an eStargz form, its eStargz tar (its blob spooled)."""
    dest = stem.with_suffix(".tar")
    norm = layers.normalize_layer(raw, dest)
    raw.unlink()
    if not form.estargz:
        return norm, dest
    lazy = stem.with_suffix(".estargz.tar")
    norm = spool_estargz(dest, lazy, form.codec, form.blob_key, form.prefetch, pool)
    dest.unlink()
    return norm, lazy.replace(dest)


@dataclass(frozen=True, kw_only=True)
class _RawLayers:
    config: dict[str, Any]  # the built image's config (what normalized_config reads of it)
    files: dict[str, Path]  # raw diff_id → its files as a tar
    from_stages: int  # how many of them were read from their stages' /out


def _read_layers(
    engine: Engine, raw_id: str, need: set[str], tmp: Path, raw_diffs: list[str], stage_layers: dict[str, str]
) -> _RawLayers:
    """The config of ``raw_id`` and the files of the layers in ``need``: each from its stage's
    ``/out`` where ``stage_layers`` names one and the files add up to the layer's size, the rest
    (and the config, when the engine's answers leave it ambiguous) out of one export of the
    image."""
    attrs = engine.inspect_raw(raw_id)
    history = list(reversed(engine.api.history(raw_id)))  # the engine answers newest first
    config = engine_config(attrs, history)
    sizes = content_sizes(attrs, history)
    files: dict[str, Path] = {}
    for raw_d in sorted(need & stage_layers.keys() & sizes.keys()):
        path = tmp / f"stage-{raw_d.split(':')[1][:16]}.tar"
        # The stage's files must add up to the layer's reported size: a layer the build log
        # attributed to the wrong stage is read out of the export instead.
        if stages.read_out(engine, stage_layers[raw_d], path) and stages.content_size(path) == sizes[raw_d]:
            files[raw_d] = path
        else:
            path.unlink(missing_ok=True)
    from_stages = len(files)
    rest = need - files.keys()
    if rest or config is None:
        exact, exported = save_layers(engine, raw_id, rest, tmp, layers=raw_diffs)
        files.update(exported)
        config = config if config is not None else json.loads(exact)
    return _RawLayers(config=config, files=files, from_stages=from_stages)


def load_image(
    engine: Engine, tmp: Path, config: bytes, diff_ids: list[str], files: dict[str, Path], tag: str
) -> None:
    """``docker load`` the image ``config`` describes, tagged ``tag``, through a tarball in
    ``tmp``; ``files`` holds the layer tars by diff_id, and a layer left out of it must be one
    whose chain the engine holds (the engine then never opens it)."""
    name = hashlib.sha256(config).hexdigest() + ".json"
    paths = [f"{d.split(':')[1]}/layer.tar" for d in diff_ids]
    manifest = [{"Config": name, "RepoTags": [tag], "Layers": paths}]
    bundle = tmp / "image.tar"
    with tarfile.open(bundle, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for data, arcname in ((config, name), (json.dumps(manifest).encode(), "manifest.json")):
            info = tarfile.TarInfo(arcname)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for diff, path in files.items():
            tar.add(path, arcname=f"{diff.split(':')[1]}/layer.tar")
    try:
        with bundle.open("rb") as fh:
            for chunk in engine.api.load_image(fh):
                error = chunk.get("error") or (chunk.get("errorDetail") or {}).get("message")
                if error:
                    msg = f"docker load of the normalized {tag} failed: {error}"
                    raise BuildFailed(msg)
    finally:
        bundle.unlink(missing_ok=True)
