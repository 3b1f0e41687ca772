"""Which wheels a platform installs, as pip is told to resolve for a platform other than its own
(``--platform``, ``--python-version``, ``--only-binary=:all:``): the manylinux tags the images'
C library accepts, and what pip's refusal means when a pin has no wheel for one.

assumed: the images run Debian bookworm (glibc 2.36), as the local stack's base and the seed's
SDK images do; a wheel tagged for a newer glibc would not load in them. pip 23 takes
``--platform`` literally (it does not widen ``manylinux_2_36`` to the older tags a glibc 2.36
accepts), so every tag is listed.

A limit of pip's, said in docs/using/platforms.md: environment markers (``; platform_machine ==
'aarch64'``) are evaluated against the machine pip runs on, not the target platform. A
dependency a wheel needs only on the target is then missing from the lock, and the platform's
build (``pip install --require-hashes`` inside an image of that platform, which evaluates the
markers for real) fails naming it: never a silently incomplete image.
"""

from __future__ import annotations

import re

from ..manifest import ImageSpec
from ..manifest.platforms import Platform
from .lockfile import TARGET_PYTHON

GLIBC = (2, 36)  # Debian bookworm's
_OLDEST = {"x86_64": 5, "aarch64": 17}  # manylinux1 is glibc 2.5; aarch64 wheels start at 2.17
_LEGACY = {"x86_64": ("manylinux2014", "manylinux2010", "manylinux1"), "aarch64": ("manylinux2014",)}


def wheel_platforms(platform: Platform) -> tuple[str, ...]:
    """Every platform tag a wheel for ``platform`` may carry, newest glibc first."""
    arch = platform.machine
    major, newest = GLIBC
    tags = [f"manylinux_{major}_{minor}_{arch}" for minor in range(newest, _OLDEST[arch] - 1, -1)]
    return (*tags, *(f"{legacy}_{arch}" for legacy in _LEGACY[arch]))


def pip_options(platform: Platform, target: str) -> list[str]:
    """The options of a ``pip install --dry-run`` that resolves for ``platform``: binary wheels
    of its tags for the images' CPython, into an empty ``target`` (pip wants one with
    ``--platform``; nothing is installed in a dry run)."""
    tags = [opt for tag in wheel_platforms(platform) for opt in ("--platform", tag)]
    py = TARGET_PYTHON.replace(".", "")
    return ["--target", target, "--ignore-installed", "--python-version", TARGET_PYTHON,
            "--implementation", "cp", "--abi", f"cp{py}", *tags]  # fmt: skip


_NO_WHEEL = re.compile(r"No matching distribution found for ([A-Za-z0-9._\-]+)(?:[=<>!~]=?\S*)?")


def no_wheel(spec: ImageSpec, platform: Platform, stderr: str) -> str | None:
    """What to tell a user when pip found no wheel of some requirement for ``platform`` (None:
    pip failed otherwise): the pin and the platform, and what to do."""
    found = _NO_WHEEL.search(stderr)
    if found is None:
        return None
    name = re.sub(r"[-_.]+", "-", found.group(1)).lower()
    pinned = [c for c in spec.of_kind("pip") if re.sub(r"[-_.]+", "-", c.package or c.id).lower() == name]
    if pinned:
        c = pinned[0]
        return (
            f"{c.pin_on(platform)} has no wheel for {platform} ({', '.join(wheel_platforms(platform)[:1])} "
            f"and older, CPython {TARGET_PYTHON}) where {spec.ref} resolves: give "
            f"components.{c.id}.platform_versions.{platform} the version its index has for {platform} "
            f"(in {spec.manifest_path}), or leave {platform} out of platforms. No lock was written."
        )
    return (
        f"{found.group(1)}, which a pin of {spec.ref} needs on {platform}, has no wheel for {platform} "
        f"where it resolves: pin a version of it that has one (pip.constraints in {spec.manifest_path}), "
        f"or leave {platform} out of platforms. No lock was written."
    )
