"""``repro``: build an image twice from scratch and say what differs, down to the files.

An engineer who breaks reproducibility (a template step that writes the time, a tool that
records the host) learns why in one run: the two builds share no build cache and no
normalization cache, every layer above the base is kept, and the layers whose diff_ids differ
are compared file by file (kind, mode, owner, mtime, size, content, link, xattrs).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from ..manifest import ImageSpec
from ..manifest.platforms import Platform
from ..manifest.registries import Registries
from ..settings import cache_dir
from . import layers
from .build import Building, build_image
from .engine import Engine, LineSink
from .inputs import BuildInputs


@dataclass(frozen=True, kw_only=True)
class LayerDiff:
    index: int  # 0 is the bottom layer
    first: str
    second: str
    files: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class ReproReport:
    ref: str
    first: str
    second: str
    layers: int
    differing: tuple[LayerDiff, ...]
    config: tuple[str, ...]  # config fields that differ

    @property
    def same(self) -> bool:
        return self.first == self.second


def _config_diff(engine: Engine, a: str, b: str) -> tuple[str, ...]:
    ca, cb = engine.inspect_raw(a), engine.inspect_raw(b)
    out = []
    for key in ("Config", "Architecture", "Os", "Created", "Author", "Comment"):
        if ca.get(key) == cb.get(key):
            continue
        if isinstance(ca.get(key), dict) and isinstance(cb.get(key), dict):
            for sub in sorted(set(ca[key]) | set(cb[key])):
                if ca[key].get(sub) != cb[key].get(sub):
                    out.append(f"{key}.{sub}: {ca[key].get(sub)!r} ≠ {cb[key].get(sub)!r}")
        else:
            out.append(f"{key}: {ca.get(key)!r} ≠ {cb.get(key)!r}")
    return tuple(out)


def check(
    root: Path, spec: ImageSpec, registries: Registries, engine: Engine, *, how: Building, on_line: LineSink,
    platform: Platform | None = None,
) -> ReproReport:  # fmt: skip
    """Two builds from scratch of ``platform``'s image (None: the first declared platform's), each
    as ``how`` says (its builder and credentials), with no cache and its layers kept."""
    each = BuildInputs.each(root, spec, registries)
    inputs = next(i for i in each if i.platform == (platform or spec.platforms[0]))
    with tempfile.TemporaryDirectory(prefix="xpu-repro-", dir=cache_dir()) as tmp_name:
        tmp = Path(tmp_name)
        built = []
        for n in ("first", "second"):
            folder = tmp / n
            folder.mkdir()
            on_line(f"==> {n} build of {inputs.ref}, from scratch")
            scratch = replace(how, rebuild=True, no_cache=True, keep_layers=folder)
            made = build_image(root, inputs, registries, engine, scratch, on_line)
            diffs = tuple((engine.inspect_raw(made.image_id).get("RootFS") or {}).get("Layers") or ())
            built.append((made.image_id, diffs, folder))
        (id_a, diffs_a, dir_a), (id_b, diffs_b, dir_b) = built
        differing = []
        for i, (da, db) in enumerate(zip(diffs_a, diffs_b, strict=False)):
            if da == db:
                continue
            fa, fb = dir_a / f"{da.split(':')[1]}.tar", dir_b / f"{db.split(':')[1]}.tar"
            files = tuple(layers.compare(fa, fb)) if fa.is_file() and fb.is_file() else ("(a base layer)",)
            differing.append(LayerDiff(index=i, first=da, second=db, files=files))
        if len(diffs_a) != len(diffs_b):
            differing.append(LayerDiff(index=-1, first=str(len(diffs_a)), second=str(len(diffs_b)),
                                       files=("the builds have different numbers of layers",)))  # fmt: skip
        return ReproReport(
            ref=spec.ref,
            first=id_a,
            second=id_b,
            layers=len(diffs_a),
            differing=tuple(differing),
            config=_config_diff(engine, id_a, id_b) if id_a != id_b else (),
        )
