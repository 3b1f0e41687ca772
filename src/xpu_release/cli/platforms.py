"""The ``--platform`` option of the commands that work on built images (build, test, sbom, scan,
repro, release): which of a release's declared platforms to work on. Without it, every declared
platform (or, for a command that reads one image, the first)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..errors import ConfigError
from ..manifest import ImageSpec
from ..manifest.platforms import KNOWN, Platform

F = TypeVar("F", bound=Callable[..., Any])


def platform_option(*, multiple: bool = True) -> Callable[[F], F]:
    said = "these declared platforms only (repeatable; default: every one the manifest declares)"
    one = "this declared platform's image (default: the first the manifest declares)"
    return click.option(
        "--platform",
        "platform_names",
        type=click.Choice(sorted(KNOWN)),
        multiple=multiple,
        help=f"Work on {said if multiple else one}.",
    )


def chosen(spec: ImageSpec, names: tuple[str, ...] | str | None) -> tuple[Platform, ...]:
    """The platforms named (in the manifest's order), each one ``spec`` declares; all of them
    when none is named. A platform the manifest does not declare is exit 3, naming both."""
    wanted = (names,) if isinstance(names, str) else tuple(names or ())
    undeclared = [n for n in wanted if KNOWN[n] not in spec.platforms]
    if undeclared:
        declared = ", ".join(p.name for p in spec.platforms)
        msg = f"--platform {undeclared[0]}: {spec.ref} is built for {declared} ({spec.manifest_path})"
        raise ConfigError(msg)
    return tuple(p for p in spec.platforms if not wanted or p.name in wanted)
