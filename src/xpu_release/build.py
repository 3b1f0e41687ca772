"""``build``: turn a rendered Dockerfile, its lock and its artifacts into an image.

Hermetic: wheels and artifacts are fetched and verified on the host, then installed from the
build context by build containers that have no network. Content-addressed: the image carries
the sha256 of its inputs, and a build whose inputs already exist as an image is skipped.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from . import fetch
from .endpoints import Registries
from .engine import Engine, LineSink
from .errors import ManifestError
from .lock import Lock, load_lock
from .manifest import ImageSpec
from .render import require_current
from .secrets import artifact_token

INPUTS_LABEL = "io.xpu-release.inputs.sha256"
MANIFEST_LABEL = "io.xpu-release.manifest.sha256"


@dataclass(frozen=True, kw_only=True)
class BuiltImage:
    ref: str  # NAME:VERSION, also the local tag
    image_id: str
    inputs_sha256: str
    manifest_sha256: str
    size: int
    skipped: bool
    seconds: float


def inputs_sha256(spec: ImageSpec, dockerfile: str, lock: Lock) -> str:
    """Everything the image is made from: the resolved manifest, the Dockerfile, the lock."""
    basis = {
        "manifest": spec.content_hash,
        "dockerfile": hashlib.sha256(dockerfile.encode()).hexdigest(),
        "lock": [[p.name, p.version, p.sha256] for layer in lock.layers for p in layer.packages],
    }
    return hashlib.sha256(json.dumps(basis, sort_keys=True).encode()).hexdigest()


def _git(root: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def revision(root: Path) -> str:
    rev = _git(root, "rev-parse", "HEAD") or "unknown"
    if rev != "unknown" and _git(root, "status", "--porcelain", "--untracked-files=no"):
        rev += "-dirty"
    return rev


def _assemble_context(root: Path, spec: ImageSpec, dockerfile: str, lock: Lock) -> Path:
    """The build context: Dockerfile, one wheel folder per pip layer, one folder per artifact."""
    ctx = fetch.cache_dir() / "contexts" / f"{spec.image}-{spec.version}"
    if ctx.exists():
        shutil.rmtree(ctx)
    ctx.mkdir(parents=True)
    (ctx / "Dockerfile").write_text(dockerfile, encoding="utf-8")
    for layer in lock.layers:
        folder = ctx / "wheels" / layer.component
        folder.mkdir(parents=True)
        (folder / "requirements.txt").write_text(lock.requirements(layer), encoding="utf-8")
        for p in layer.packages:
            wheel = fetch.fetch(p.url, p.sha256, p.filename, pip_fallback=f"{p.name}=={p.version}")
            fetch.link_or_copy(wheel, folder / p.filename)
    token = artifact_token()
    for c in spec.of_kind("artifact"):
        assert c.url is not None
        assert c.sha256 is not None
        blob = fetch.fetch(c.url, c.sha256, f"{c.id}.{c.format}", token=token)
        fetch.link_or_copy(blob, ctx / "artifacts" / c.id / f"{c.id}.{c.format}")
    return ctx


def build_image(
    root: Path,
    spec: ImageSpec,
    registries: Registries,
    engine: Engine,
    *,
    rebuild: bool = False,
    on_line: LineSink,
) -> BuiltImage:
    started = time.monotonic()
    unpinned = [c.id for c in spec.of_kind("artifact") if not c.sha256]
    if unpinned:
        msg = (
            f"{spec.manifest_path}: components {', '.join(unpinned)} have no sha256 (assumed "
            "artifacts); pin their checksums before building"
        )
        raise ManifestError(msg)
    rendered = require_current(root, spec)
    lock = load_lock(root, spec)
    inputs = inputs_sha256(spec, rendered.text, lock)

    existing = engine.image(spec.ref)
    if existing and existing.labels.get(INPUTS_LABEL) == inputs and not rebuild:
        on_line(f"{spec.ref} is up to date ({existing.id[:19]}, inputs {inputs[:12]}); skipping the build")
        return BuiltImage(
            ref=spec.ref,
            image_id=existing.id,
            inputs_sha256=inputs,
            manifest_sha256=spec.content_hash,
            size=existing.size,
            skipped=True,
            seconds=time.monotonic() - started,
        )

    context = _assemble_context(root, spec, rendered.text, lock)
    hub = registries.endpoint(spec.base.registry)
    base_ref = hub.ref(spec.base.repository, spec.base.tag)
    labels = {
        "org.opencontainers.image.title": spec.image,
        "org.opencontainers.image.version": spec.version,
        "org.opencontainers.image.revision": revision(root),
        "org.opencontainers.image.created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "org.opencontainers.image.source": _git(root, "remote", "get-url", "origin") or spec.manifest_path,
        "org.opencontainers.image.base.name": base_ref,
        MANIFEST_LABEL: spec.content_hash,
        INPUTS_LABEL: inputs,
    }
    if engine.image(base_ref) is None:
        on_line(f"pulling base image {base_ref}")
        engine.pull(base_ref)
    image_id = engine.build(
        context=context,
        tag=spec.ref,
        buildargs={"BASE_REGISTRY": hub.prefix},
        labels=labels,
        on_line=on_line,
    )
    shutil.rmtree(context, ignore_errors=True)
    info = engine.require_image(image_id)
    return BuiltImage(
        ref=spec.ref,
        image_id=image_id,
        inputs_sha256=inputs,
        manifest_sha256=spec.content_hash,
        size=info.size,
        skipped=False,
        seconds=time.monotonic() - started,
    )
