"""Turn what the classic builder made into the reproducible image that is tested and published.

The classic builder stamps every image with its moment and place: the config's ``created`` and
history times, the id of the last build container, the engine's version, and layers whose files
carry the build's mtimes. ``normalize`` takes the built image apart and assembles the image the
release really is:

- the base's layers as they are (pinned by digest, so already fixed);
- every layer above them rewritten by ``layers.normalize_layer`` (sorted, mtimes clamped to one
  fixed moment that no release changes, no bytecode, no owner names);
- a config with ``created`` and every history time at the release's SOURCE_DATE_EPOCH, and
  nothing of the build container or the engine.

Its id, the sha256 of that config, is then a pure function of the manifest, the lock and the
base digest. It is loaded into the engine with ``docker load``; layers the engine already holds
(the same chain) are not sent again, and a layer rewritten once is not rewritten again: the
raw → normalized diff_id map is kept in the cache (it is a pure function as well).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import BuildFailed
from ..oci.store import DigestMap, canonical_json, known_config, remember_config
from ..settings import cache_dir
from . import layers
from .engine import Engine, LineSink
from .export import layer_sizes, save_layers

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


def iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def chain_ids(diff_ids: Iterable[str]) -> list[str]:
    """The OCI chain ids of a layer stack: how an engine names "these layers, in this order"."""
    out: list[str] = []
    for d in diff_ids:
        out.append(d if not out else "sha256:" + hashlib.sha256(f"{out[-1]} {d}".encode()).hexdigest())
    return out


def normalized_config(raw: dict[str, Any], diff_ids: list[str], epoch: int) -> dict[str, Any]:
    """The config of the reproducible image: only what describes the image, times at the epoch."""
    out: dict[str, Any] = {k: raw[k] for k in _KEPT if k in raw}
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


def _layer_map() -> DigestMap:
    """raw diff_id → normalized diff_id, for one set of rules (a pure function: kept)."""
    return DigestMap(f"normalized-layers/v{layers.RULES_VERSION}-{layers.MTIME_EPOCH}")


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


def normalize(
    engine: Engine,
    raw_id: str,
    *,
    base_layers: int,
    epoch: int,
    tag: str,
    on_line: LineSink,
    keep_layers: Path | None = None,
    rewrite_all: bool = False,
) -> Normalized:
    """Assemble and load the reproducible image of the built ``raw_id``; tag it ``tag``.

    ``base_layers``: how many of the bottom layers are the pinned base's, kept as they are.
    ``keep_layers``: a folder to keep every layer above the base in, as ``<diff_id hex>.tar``
    (to compare two builds). With it, or ``rewrite_all``, every layer is rewritten, none is
    taken from the cache."""
    raw = engine.inspect_raw(raw_id)
    raw_diffs: list[str] = list((raw.get("RootFS") or {}).get("Layers") or ())
    mapping = _layer_map()
    fresh = rewrite_all or keep_layers is not None
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
        rewritten = 0
        if need:
            on_line(f"normalizing {len(need)} of {len(raw_diffs) - base_layers} layers")
        raw_config = known_config(raw_id)  # the built image's own config, kept by an earlier run
        if need or raw_config is None:
            raw_config, exported = save_layers(engine, raw_id, need, tmp, layers=raw_diffs)
            remember_config(raw_config)
            for raw_d, path in exported.items():
                dest = (keep_layers or tmp) / f"layer-{raw_d.split(':')[1][:16]}.tar"
                norm = layers.normalize_layer(path, dest)
                path.unlink()
                if keep_layers is not None:
                    dest = dest.replace(keep_layers / f"{norm.split(':')[1]}.tar")
                mapping.put(raw_d, norm)
                layer_sizes().put(norm, str(dest.stat().st_size))
                known[raw_d] = norm
                files[norm] = dest
                rewritten += 1
        diff_ids = [*raw_diffs[:base_layers], *(str(known[d]) for d in raw_diffs[base_layers:])]
        config = config_bytes(normalized_config(json.loads(raw_config), diff_ids, epoch))
        image_id = remember_config(config)
        load_image(engine, tmp, config, diff_ids, files, tag)
    loaded = engine.require_image(tag)
    if loaded.id != image_id:
        msg = f"the engine loaded {tag} as {loaded.id}, not the assembled {image_id}"
        raise BuildFailed(msg)
    return Normalized(
        image_id=image_id,
        rewritten=rewritten,
        reused=len(raw_diffs) - base_layers - rewritten,
    )


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
