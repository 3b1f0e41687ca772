"""Render an ``ImageSpec`` into its Dockerfile through the Jinja2 templates in ``templates/``."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from ..errors import ManifestError, StaleError
from ..guard.generated import committed, is_current, write_generated
from ..manifest import ImageSpec, schema
from ..manifest.registries import Registries
from ..manifest.yamlsrc import Source
from .layerform import LayerForm, layer_form
from .templating import render_template
from .workload import carried


@dataclass(frozen=True, kw_only=True)
class PipGroup:
    """One pip layer: a pinned component and the dependencies no earlier layer installs."""

    id: str
    title: str


@dataclass(frozen=True, kw_only=True)
class Rendered:
    spec: ImageSpec
    path: Path  # where it is committed
    text: str


def dockerfile_path(root: Path, spec: ImageSpec) -> Path:
    return root / "images" / spec.image / spec.version / "Dockerfile"


IMAGE_FILE = schema.Obj(
    fields={
        "template": schema.Str(
            pattern=r"[A-Za-z0-9_.\-]+\.j2",
            what="a template file name in templates/",
            description="The Jinja2 template that renders every version's Dockerfile (e.g. Dockerfile.j2).",
        ),
        "description": schema.Text(description="What the image is for, in a sentence."),
        "source": schema.Str(
            pattern=r"https://[^\s]+",
            what="an https URL",
            hint="the repository that holds this image's definition",
            description="The image's org.opencontainers.image.source annotation (none when absent).",
        ),
        "layers": schema.Enum(
            choices=("gzip", "estargz"),
            description="How the image's own layers are written: gzip (the default), or eStargz, which "
            "containerd's stargz snapshotter mounts before the layer is downloaded; every other puller "
            "takes it as gzip. With eStargz, each version's prefetch.txt beside its lock is written first.",
        ),
    },
    required=("template",),
    description="images/<image>/image.yaml: the non-versioned definition of an image.",
)


def _image_file(root: Path, image: str) -> Source | None:
    path = root / "images" / image / "image.yaml"
    return schema.load_checked(path, str(path.relative_to(root)), IMAGE_FILE) if path.is_file() else None


def image_template(root: Path, image: str) -> str:
    """The template ``images/<image>/image.yaml`` names (Dockerfile.j2 when there is none)."""
    src = _image_file(root, image)
    if src is None:
        return "Dockerfile.j2"
    name = str(src.data["template"])
    if not (root / "templates" / name).is_file():
        raise ManifestError([src.problem(("template",), f"templates/{name} does not exist")])
    return name


def image_source(root: Path, image: str) -> str:
    """The repository URL ``images/<image>/image.yaml`` gives as ``source`` ("" if none)."""
    src = _image_file(root, image)
    return str(src.data.get("source") or "") if src is not None else ""


def image_layers(root: Path, spec: ImageSpec) -> LayerForm:
    """How ``spec``'s own layers are written: ``image.yaml``'s ``layers`` (gzip when unsaid),
    with the version's prefetch profile if eStargz (else the one of the version it extends)."""
    src = _image_file(root, spec.image)
    layers = str(src.data.get("layers") or "gzip") if src else "gzip"
    return layer_form(root, spec.image, spec.version, layers, spec.extends)


def render(root: Path, spec: ImageSpec, registries: Registries, template: str | None = None) -> Rendered:
    """The Dockerfile for ``spec``. Deterministic: the same inputs give the same bytes.

    The committed Dockerfile names the base registry of the repository's own registries.yaml
    (``registries.committed()``, whatever overrides it); a build passes the base pinned by
    digest, from the registry in use, as BASE_IMAGE."""
    template = template or image_template(root, spec.image)
    hub = registries.committed().endpoint(spec.base.registry)
    base_component = spec.component(spec.base.component) if spec.base.component else None
    groups = [
        PipGroup(id=c.id, title=f"{c.pin} and what no earlier layer installs") for c in spec.of_kind("pip")
    ]
    text = render_template(
        root,
        template,
        spec=spec,
        base_registry=hub.prefix,
        base_component=base_component,
        artifacts=spec.of_kind("artifact"),
        pip_groups=groups,
        workload=carried(spec),
    )
    return Rendered(spec=spec, path=dockerfile_path(root, spec), text=text)


def require_current(root: Path, spec: ImageSpec, registries: Registries) -> Rendered:
    """The rendered Dockerfile of ``spec``; StaleError with the diff if the committed one differs."""
    rendered = render(root, spec, registries)
    diff = stale_diff(rendered, root)
    if diff:
        msg = f"{rendered.path.relative_to(root)} is stale; run `xpu-release render {spec.ref}`\n{diff}"
        raise StaleError(msg)
    return rendered


def stale_diff(rendered: Rendered, root: Path) -> str | None:
    """A unified diff if the committed Dockerfile differs from ``rendered``, else None."""
    rel = rendered.path.relative_to(root)
    if is_current(rendered.path, rendered.text.encode(), what=str(rel)):
        return None
    current = committed(rendered.path, what=str(rel)) or ""
    diff = difflib.unified_diff(
        current.splitlines(keepends=True),
        rendered.text.splitlines(keepends=True),
        fromfile=f"{rel} (committed)" if current else f"{rel} (missing)",
        tofile=f"{rel} (rendered)",
    )
    return "".join(diff)


def write(rendered: Rendered, root: Path) -> bool:
    """Write the Dockerfile inside the repository ``root`` (never through a link); True if it
    changed."""
    data = rendered.text.encode()
    if is_current(rendered.path, data, what="Dockerfile"):
        return False
    write_generated(rendered.path, data, root=root, what="Dockerfile")
    return True
