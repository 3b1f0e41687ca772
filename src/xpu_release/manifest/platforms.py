"""The platforms a release is built for (``platforms:``), as a manifest names them
(``linux/amd64``, ``linux/arm64``) and as every later stage reads them: the OCI platform of an
image config and of an image index's entry (``architecture``, ``variant``), the machine
``uname -m`` names inside a container, the wheel tags a lock is resolved with, and the tag a
platform's image has in the engine.

A manifest without ``platforms:`` (or with ``[linux/amd64]``) is for linux/amd64 alone, as
every release was before the key existed: its lock is the single-platform lock, its image one
image manifest, its inputs digest unchanged. Any other set of platforms (``platformed``) has a
lock section per platform and is published as one OCI image index naming each platform's image.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..oci.model import Descriptor
from ..oci.model import Platform as OciPlatform
from .tokens import VERSION
from .types import Checker, Enum, List, Map, Str


@dataclass(frozen=True, kw_only=True)
class Platform:
    """One platform: its name in a manifest and what the image config, an index entry, ``uname
    -m`` and pip's wheel tags call it."""

    name: str  # as a manifest writes it: linux/arm64
    os: str
    architecture: str  # the image config's (Go's GOARCH): amd64, arm64
    variant: str = ""  # the image config's: v8 for arm64, as Docker writes it
    machine: str  # what `uname -m` says in a container of it (and pip's platform_machine)

    @property
    def slug(self) -> str:
        """The platform in a file name or a tag: ``linux-arm64``."""
        return f"{self.os}-{self.architecture}"

    def local_ref(self, ref: str) -> str:
        """The tag of this platform's image of ``ref`` in the engine: ``ref`` itself for
        linux/amd64 (as every release was tagged before platforms existed), ``ref-arm64`` else."""
        return ref if self == AMD64 else f"{ref}-{self.architecture}"

    def matches(self, entry: OciPlatform | None) -> bool:
        """An image index entry's platform is this one: one without a variant matches too
        (Docker writes arm64 with v8 or with none)."""
        return (
            entry is not None
            and (entry.os, entry.architecture) == (self.os, self.architecture)
            and entry.variant in ("", self.variant)
        )

    def entry(self, entries: Iterable[Descriptor]) -> Descriptor | None:
        """The first of an image index's ``entries`` for this platform (None: it names none)."""
        return next((d for d in entries if self.matches(d.platform)), None)

    def oci(self) -> dict[str, str]:
        """The platform object of an image index entry (image-spec ``image-index.md``)."""
        out = {"architecture": self.architecture, "os": self.os}
        return {**out, "variant": self.variant} if self.variant else out

    def __str__(self) -> str:
        return self.name


AMD64 = Platform(name="linux/amd64", os="linux", architecture="amd64", machine="x86_64")
ARM64 = Platform(name="linux/arm64", os="linux", architecture="arm64", variant="v8", machine="aarch64")
KNOWN: dict[str, Platform] = {p.name: p for p in (AMD64, ARM64)}
DEFAULT: tuple[Platform, ...] = (AMD64,)


def of_names(names: Iterable[str] | None) -> tuple[Platform, ...]:
    """The platforms a validated manifest names (None: the default, linux/amd64 alone)."""
    return tuple(KNOWN[n] for n in names) if names else DEFAULT


def platformed(platforms: tuple[Platform, ...]) -> bool:
    """Any platforms but linux/amd64 alone: a lock section per platform, an index published."""
    return platforms != DEFAULT


_NAME = "|".join(KNOWN)

PLATFORMS = List(
    item=Enum(choices=tuple(KNOWN)),
    unique=True,
    min_items=1,
    description="The platforms the release is built, tested and published for, each its own image "
    "under one OCI image index (default: [linux/amd64], one image manifest, as before). Inherited.",
)
PLATFORM_VERSIONS = Map(
    value=VERSION,
    key=Str(pattern=_NAME, what="a platform", hint=", ".join(KNOWN), max_len=20),
    description="The version a declared platform installs instead, where its wheels carry "
    "another (e.g. torch 2.13.0+cpu on linux/amd64 is 2.13.0 on linux/arm64). The lock says it.",
)


def platform_versions_name_declared_platforms(data: dict[str, object], c: Checker) -> None:
    """A component's ``platform_versions`` names platforms the release declares."""
    declared = data.get("platforms") or [p.name for p in DEFAULT]
    components = data.get("components")
    for cid, comp in (components if isinstance(components, dict) else {}).items():
        versions = comp.get("platform_versions") if isinstance(comp, dict) else None
        for name in versions if isinstance(versions, dict) else ():
            if isinstance(declared, list) and name not in declared:
                where = ("components", cid, "platform_versions", name)
                c.fail(where, f"{name} is not a platform of this release (platforms: {', '.join(declared)})")
