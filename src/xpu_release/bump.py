"""``new-version``: start a release that extends an earlier one and overrides a few pins."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError, ManifestError
from .manifest import ImageSpec, Repo
from .manifest.schema import VERSION, Checker
from .yamlsrc import Source

SET_RX = re.compile(r"(?P<id>[a-z0-9]+(?:[._\-][a-z0-9]+)*)=(?P<version>.+)")


@dataclass(frozen=True, kw_only=True)
class Bump:
    component: str
    version: str


def parse_sets(values: tuple[str, ...]) -> tuple[Bump, ...]:
    out = []
    for raw in values:
        m = SET_RX.fullmatch(raw)
        if not m:
            msg = f"--set {raw!r}: expected COMPONENT=VERSION, e.g. --set vllm=0.8.0"
            raise ConfigError(msg)
        checker = Checker(Source(file="--set", data=None))
        VERSION.check(m["version"], (m["id"],), checker)
        if checker.problems:
            msg = f"--set {raw!r}: {checker.problems[0].message}"
            raise ConfigError(msg)
        out.append(Bump(component=m["id"], version=m["version"]))
    return tuple(out)


def child_text(image: str, version: str, parent: str, bumps: tuple[Bump, ...]) -> str:
    lines = [
        "# yaml-language-server: $schema=../../schema/manifest.schema.json",
        f"# {image} {version}: {parent} plus what changed below (see `xpu-release diff`).",
        f"image: {image}",
        f'version: "{version}"',
        f'extends: "{parent}"',
    ]
    if bumps:
        lines.append("components:")
        for b in bumps:
            lines += [f"  {b.component}:", f'    version: "{b.version}"']
    lines += ["release:", "  bug_fixes: []"]
    return "\n".join(lines) + "\n"


def new_version(
    repo: Repo, image: str, version: str, parent: str, bumps: tuple[Bump, ...]
) -> tuple[Path, ImageSpec]:
    """Write ``manifests/<image>/<version>.yaml``; validate it, and leave nothing if invalid."""
    base = repo.load(image, parent)
    known = {c.id for c in base.components}
    for b in bumps:
        if b.component not in known:
            have = ", ".join(sorted(known))
            msg = f"--set {b.component}=…: {image}:{parent} has no component {b.component!r} (has: {have})"
            raise ConfigError(msg)
    path = repo.manifest_path(image, version)
    if path.exists():
        msg = f"{repo.rel(path)} already exists; edit it instead"
        raise ConfigError(msg)
    path.write_text(child_text(image, version, parent, bumps), encoding="utf-8")
    try:
        spec = repo.load(image, version)
    except ManifestError:
        path.unlink()
        raise
    return path, spec
