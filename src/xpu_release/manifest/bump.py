"""``new-version``: start a release that extends an earlier one and overrides a few pins."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..guard.writing import write_bytes
from . import ImageSpec, Repo
from .schema import Checker
from .tokens import VERSION
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


class _Plain(yaml.SafeDumper):
    """YAML as a person writes it: no anchors (the loader refuses them), keys in given order."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def child_text(
    image: str, version: str, parent: str, bumps: tuple[Bump, ...], extra: dict[str, Any] | None = None
) -> str:
    """A manifest that extends ``parent`` and moves the ``bumps``' pins; ``extra``: more keys
    (``patch`` writes base, pip and release), else an empty ``release.bug_fixes`` to fill in."""
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
    if extra:
        lines.append(yaml.dump(extra, Dumper=_Plain, sort_keys=False, allow_unicode=True, width=100).rstrip())
    else:
        lines += ["release:", "  bug_fixes: []"]
    return "\n".join(lines) + "\n"


def check_bumps(base: ImageSpec, bumps: tuple[Bump, ...]) -> None:
    """Refuse a ``--set`` that names no component, changes nothing, or moves an artifact (whose
    url and sha256 are another file's once the version moves)."""
    known = {c.id: c for c in base.components}
    seen: set[str] = set()
    for b in bumps:
        flag = f"--set {b.component}={b.version}"
        comp = known.get(b.component)
        if comp is None:
            close = difflib.get_close_matches(b.component, sorted(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            have = ", ".join(sorted(known))
            msg = f"{flag}: {base.ref} has no component {b.component!r}{hint} (has: {have})"
            raise ConfigError(msg)
        if b.component in seen:
            msg = f"{flag}: {b.component} is set twice; give one version"
            raise ConfigError(msg)
        seen.add(b.component)
        if comp.version == b.version:
            msg = f"{flag}: {base.ref} already pins {b.component} {b.version}; this --set changes nothing"
            raise ConfigError(msg)
        if comp.kind == "base":
            msg = (
                f"{flag}: {b.component} is what the base image carries; change base.tag (and "
                f"components.{b.component}.version) in the new manifest instead"
            )
            raise ConfigError(msg)
        if comp.kind == "artifact":
            msg = (
                f"{flag}: {b.component} is an artifact, and its url and sha256 change with its "
                f"version; leave it out here, then set components.{b.component}.version, url and "
                "sha256 in the new manifest"
            )
            raise ConfigError(msg)


def new_version(
    repo: Repo, image: str, version: str, parent: str, bumps: tuple[Bump, ...]
) -> tuple[Path, ImageSpec]:
    """Write ``manifests/<image>/<version>.yaml``; validate it, and leave nothing if invalid."""
    from .loader import check_version

    base = repo.load(image, check_version(parent, "--from"))
    check_bumps(base, bumps)
    return write_child(repo, image, version, child_text(image, version, parent, bumps))


def write_child(repo: Repo, image: str, version: str, text: str) -> tuple[Path, ImageSpec]:
    """Write ``text`` as ``manifests/<image>/<version>.yaml`` (never over a file that is there)
    and load it; an invalid one is removed and its problems raised."""
    from ..files import kind_of

    path = repo.manifest_path(image, version)
    if kind_of(path) != "missing":
        msg = f"{repo.rel(path)} already exists; edit it instead"
        raise ConfigError(msg)
    try:
        # Whole or not at all (a temporary of this run's own, never through a link), and never
        # over a file or a link made meanwhile: a killed run leaves no half manifest behind.
        write_bytes(path, text.encode(), within=path.parent, what="new manifest", keep_existing=True)
    except FileExistsError:
        msg = f"{repo.rel(path)} already exists; edit it instead"
        raise ConfigError(msg) from None
    try:
        spec = repo.load(image, version)
    except BaseException:
        path.unlink(missing_ok=True)  # nothing half-made is left behind
        raise
    return path, spec
