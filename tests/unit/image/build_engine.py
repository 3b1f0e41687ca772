"""An engine in memory that builds as Docker 20.10's classic builder does, for the build's tests:
each build stamps its own moment on the layer's files and the config, names the build container,
and says ``architecture: amd64`` whatever it built (the engine ignores the platform of what it
imports); it saves (``docker save``) and loads (``docker load``) as the engine does. A base pulled
by digest holds a file naming that digest, so each platform's base differs."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpu_release.image.engine import ImageInfo


def _tar(files: dict[str, bytes], mtime: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.uname = len(data), mtime, f"builder-{mtime}"
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class _Image:
    config: bytes
    layers: list[str]  # diff_ids
    history: list[dict[str, Any]]  # oldest first, with Size

    @property
    def id(self) -> str:
        return _sha(self.config)

    @property
    def data(self) -> dict[str, Any]:
        return json.loads(self.config)  # type: ignore[no-any-return]


@dataclass
class BuildEngine:
    store: dict[str, _Image] = field(default_factory=dict)  # id → image
    tags: dict[str, str] = field(default_factory=dict)  # ref → id
    blobs: dict[str, bytes] = field(default_factory=dict)  # diff_id → layer tar
    clock: int = 1_900_000_000  # the moment of the next build
    built: list[dict[str, Any]] = field(default_factory=list)  # each build's arguments

    @property
    def api(self) -> BuildEngine:
        return self

    def _store(self, config: dict[str, Any], layers: list[bytes], history: list[dict[str, Any]]) -> str:
        for layer in layers:
            self.blobs[_sha(layer)] = layer
        body = json.dumps(config, sort_keys=True).encode()
        image = _Image(config=body, layers=list(config["rootfs"]["diff_ids"]), history=history)
        self.store[image.id] = image
        return image.id

    def _find(self, ref: str) -> _Image | None:
        return self.store.get(self.tags.get(ref, ref))

    # --- what Engine offers ----------------------------------------------------------------------

    def image(self, ref: str) -> ImageInfo | None:
        found = self._find(ref)
        return ImageInfo.from_attrs(self.inspect_raw(ref)) if found is not None else None

    def require_image(self, ref: str) -> ImageInfo:
        info = self.image(ref)
        assert info is not None, ref
        return info

    def inspect_raw(self, ref: str) -> dict[str, Any]:
        image = self._find(ref)
        assert image is not None, ref
        data = image.data
        return {
            "Id": image.id, "RepoTags": [t for t, i in self.tags.items() if i == image.id],
            "Architecture": data.get("architecture"), "Os": data.get("os"), "Variant": data.get("variant"),
            "Config": data.get("config") or {}, "Size": sum(len(self.blobs[d]) for d in image.layers),
            "RootFS": {"Type": "layers", "Layers": image.layers},
        }  # fmt: skip

    def pull(self, ref: str, auth: Any = None) -> None:
        layer = _tar({"etc/base": ref.rpartition("@")[2].encode()}, 1_600_000_000)
        config = {"architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/usr/bin"]},
                  "rootfs": {"type": "layers", "diff_ids": [_sha(layer)]},
                  "history": [{"created_by": "debootstrap", "created": "2025-03-01T00:00:00Z"}]}  # fmt: skip
        self.tags[ref] = self._store(config, [layer], [{"CreatedBy": "debootstrap", "Size": len(layer)}])

    def build(self, *, context: Path, tag: str, buildargs: dict[str, str], labels: dict[str, str],
              on_line: Any, nocache: bool = False, name: str | None = None) -> str:  # fmt: skip
        self.built.append({"tag": tag, "buildargs": dict(buildargs), "labels": dict(labels)})
        base = self._find(buildargs["BASE_IMAGE"])
        assert base is not None, "the base is pulled before the build"
        files = {
            str(p.relative_to(context)): p.read_bytes() for p in sorted(context.rglob("*")) if p.is_file()
        }
        layer = _tar({f"opt/context/{k}": v for k, v in files.items()}, self.clock)
        when = f"{self.clock}"
        config = {
            "architecture": "amd64", "os": "linux", "container": f"c{self.clock}", "created": when,
            "docker_version": "20.10.24",
            "config": {"Env": ["PATH=/usr/bin"], "Labels": labels},
            "rootfs": {"type": "layers", "diff_ids": [*base.layers, _sha(layer)]},
            "history": [*base.data["history"], {"created_by": "COPY . /opt/context", "created": when}],
        }  # fmt: skip
        self.clock += 1000
        history = [*base.history, {"CreatedBy": "COPY . /opt/context", "Size": len(layer)}]
        self.tags[tag] = self._store(config, [layer], history)
        return self.tags[tag]

    # --- the low-level API normalize reads -----------------------------------------------------

    def images(self, all: bool = False) -> list[dict[str, str]]:
        return [{"Id": i} for i in self.store]

    def history(self, ref: str) -> list[dict[str, Any]]:
        image = self._find(ref)
        assert image is not None
        return list(reversed(image.history))  # newest first, as the engine answers

    def get_image(self, ref: str, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        image = self._find(ref)
        assert image is not None
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            entries = [(f"{image.id.split(':')[1]}.json", image.config)]
            entries += [(f"{i:04d}/layer.tar", self.blobs[d]) for i, d in enumerate(image.layers)]
            for name, data in entries:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        data = buf.getvalue()
        yield from (data[i : i + chunk_size] for i in range(0, len(data), chunk_size))

    def load_image(self, fh: Any) -> Iterator[dict[str, Any]]:
        with tarfile.open(fileobj=io.BytesIO(fh.read())) as tar:
            read = {m.name: tar.extractfile(m).read() for m in tar if m.isreg()}  # type: ignore[union-attr]
        (entry,) = json.loads(read["manifest.json"])
        config = read[entry["Config"]]
        for path in entry["Layers"]:
            if path in read:
                self.blobs[_sha(read[path])] = read[path]
        data = json.loads(config)
        assert all(d in self.blobs for d in data["rootfs"]["diff_ids"]), "a layer the engine lacks"
        image = _Image(config=config, layers=list(data["rootfs"]["diff_ids"]), history=[])
        self.store[image.id] = image
        for tag in entry["RepoTags"]:
            self.tags[tag] = image.id
        yield {"stream": f"Loaded image: {entry['RepoTags'][0]}"}
