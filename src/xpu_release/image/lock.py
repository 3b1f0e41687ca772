"""``lock``: resolve an image's pip pins with pip's own resolver into a hashed, layered lock.

The lock (``images/<image>/<version>/requirements.lock``) is committed beside the Dockerfile.
It lists every distribution the image installs, with its sha256 and the URL it came from,
grouped into one layer per pinned component (the component and whatever it needs that no
earlier layer installs), so the build can install each layer from a wheelhouse with
``--require-hashes`` and no network.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from ..errors import LockError
from ..manifest import ImageSpec
from ..manifest.model import canonical_name
from ..manifest.platforms import Platform
from .lockfile import (
    BASE_PIN,
    TARGET_PYTHON,
    Layer,
    Lock,
    Locked,
    Locks,
    base_missing,
    check_base,
    earlier_lock,
    earlier_locks,
    load_lock,
    load_locks,
    lock_path,
    pins_sha256,
    read_locks,
)
from .pipreport import Pins, pip_report

__all__ = [
    "BASE_PIN",
    "TARGET_PYTHON",
    "Kept",
    "Layer",
    "Lock",
    "Locked",
    "Locks",
    "base_missing",
    "check_base",
    "check_index",
    "earlier_lock",
    "earlier_locks",
    "layers_from_report",
    "load_lock",
    "load_locks",
    "lock_path",
    "pin_base",
    "pins_sha256",
    "read_locks",
    "resolve",
]


def check_index(spec: ImageSpec) -> None:
    """Fail fast, naming the index, when the manifest's index cannot be reached."""
    if not spec.pip_index_url:
        return
    import requests

    from ..oci.connection import outside_session

    try:
        with outside_session() as session:
            session.get(spec.pip_index_url, timeout=10, stream=True).close()  # the headers say it answers
    except requests.RequestException as exc:
        reason = type(exc).__name__
        msg = (
            f"cannot reach the package index {spec.pip_index_url} ({reason}), named in "
            f"{spec.manifest_path}: pip.index_url. The pins "
            f"{', '.join(c.pin for c in spec.of_kind('pip'))} come from it; lock {spec.ref} on a "
            "machine that reaches it. No lock was written."
        )
        raise LockError(msg) from None


@dataclass(frozen=True)
class Kept:
    """What a new lock keeps of an earlier one, as pip-compile keeps existing pins: a version
    bump moves its own layer, never the transitive pins of the layers it did not touch.

    ``steady`` are the pins of the layers whose manifest pin is unchanged; ``moved`` what the
    layers of changed pins needed besides the pinned distribution itself. The resolution tries
    both, then ``steady`` alone, then nothing (what the new pins need wins over what was kept)."""

    steady: Pins = ()
    moved: Pins = ()

    @classmethod
    def of(cls, earlier: Lock, spec: ImageSpec, platform: Platform | None = None) -> Kept:
        pins = {c.id: c.pin_on(platform or spec.platforms[0]) for c in spec.of_kind("pip")}
        roots = {canonical_name(c.package or c.id) for c in spec.of_kind("pip")}
        floors = _floors(spec)
        steady: list[tuple[str, str]] = []
        moved: list[tuple[str, str]] = []
        for layer in earlier.layers:
            same = pins.get(layer.component) == layer.pin
            for p in layer.packages:
                # The manifest pins its own components; a version pip would not read as one
                # (a lock is a file anyone may edit) is not kept, never passed to pip.
                if canonical_name(p.name) not in roots and _is_version(p.version):
                    # Below a constraint's floor (a patch raising it past an advisory): the
                    # floor itself is kept instead, the smallest version the constraint allows.
                    floor = floors.get(canonical_name(p.name))
                    version = floor if floor and Version(p.version) < Version(floor) else p.version
                    (steady if same and version == p.version else moved).append((p.name, version))
        return cls(steady=tuple(steady), moved=tuple(moved))

    def attempts(self) -> tuple[Pins, ...]:
        """The constraint sets to try, most kept first; the last is always none."""
        tiers = [self.steady + self.moved, self.steady, ()]
        return tuple(t for i, t in enumerate(tiers) if t not in tiers[:i])


def _floors(spec: ImageSpec) -> dict[str, str]:
    """pip.constraints as {canonical name: the lowest version it allows}."""
    out = {}
    for line in spec.pip_constraints:
        name, _, floor = line.partition(">=")
        if _is_version(floor):
            out[canonical_name(name)] = floor
    return out


def _is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def _requires(item: dict[str, Any], platform: Platform) -> list[str]:
    """Names a resolved distribution depends on, in the target environment, without extras."""
    env = {
        "python_version": TARGET_PYTHON,
        "python_full_version": TARGET_PYTHON + ".0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": platform.machine,
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }
    out = []
    for raw in item["metadata"].get("requires_dist") or ():
        try:
            req = Requirement(raw)
        except InvalidRequirement:
            continue
        if req.marker is None or Marker(str(req.marker)).evaluate(env):
            out.append(canonical_name(req.name))
    return out


def layers_from_report(
    spec: ImageSpec, report: dict[str, Any], platform: Platform | None = None
) -> tuple[Layer, ...]:
    """Group resolved distributions into one layer per pinned component, in manifest order."""
    platform = platform or spec.platforms[0]
    resolved: dict[str, Locked] = {}
    deps: dict[str, list[str]] = {}
    for item in report["install"]:
        name = canonical_name(item["metadata"]["name"])
        hashes = (item["download_info"].get("archive_info") or {}).get("hashes") or {}
        if "sha256" not in hashes:
            msg = f"pip gave no sha256 for {name}; the index must publish hashes"
            raise LockError(msg)
        resolved[name] = Locked(
            name=item["metadata"]["name"],
            version=item["metadata"]["version"],
            sha256=hashes["sha256"],
            url=item["download_info"]["url"],
        )
        deps[name] = _requires(item, platform)
    taken: set[str] = set()
    layers = []
    for c in spec.of_kind("pip"):
        root = canonical_name(c.package or c.id)
        todo, closure = [root], []
        while todo:
            name = todo.pop(0)
            if name in taken or name in closure or name not in resolved:
                continue
            closure.append(name)
            todo.extend(deps.get(name, ()))
        taken.update(closure)
        ordered = [root, *sorted(n for n in closure if n != root)]
        layers.append(
            Layer(
                component=c.id,
                pin=c.pin_on(platform),
                packages=tuple(resolved[n] for n in ordered if n in resolved),
            )
        )
    leftover = sorted(set(resolved) - taken)
    if leftover and layers:
        last = layers[-1]
        layers[-1] = Layer(
            component=last.component,
            pin=last.pin,
            packages=last.packages + tuple(resolved[n] for n in leftover),
        )
    return tuple(layers)


def pin_base(spec: ImageSpec, digest: str) -> str:
    """How a lock records the base: ``repository:tag@sha256:…``."""
    return f"{spec.base.repository}:{spec.base.tag}@{digest}"


def resolve(
    spec: ImageSpec,
    base: str = "",
    provided: Pins = (),
    keep: Kept = Kept(),
    platform: Platform | None = None,
) -> Lock:
    """Resolve ``spec``'s pins into a lock (network: the configured index or pip's config);
    ``base`` is the pinned base (``pin_base``) the lock records, ``provided`` what it has
    installed: constraints no layer may break, and never installed again; ``keep`` the earlier
    pins to keep where the new pins allow them. ``platform``: resolved with that platform's
    wheels (a platformed lock's section); None: for this machine, as a lock of linux/amd64."""
    on = platform or spec.platforms[0]
    have = {canonical_name(n) for n, _ in provided}
    missing = [p for p in spec.base.provides if canonical_name(p) not in have]
    if base and missing:
        msg = (
            f"{spec.manifest_path}: base.provides names {', '.join(missing)}, but the base {base} "
            f"has no such distribution (it has {len(provided)}); fix base.provides or the base"
        )
        raise LockError(msg)
    versions = {canonical_name(n): v for n, v in provided}
    carried = spec.component(spec.base.component) if spec.base.component else None
    if (
        base
        and carried
        and canonical_name(carried.id) in versions
        and versions[canonical_name(carried.id)] != carried.version_on(on)
    ):
        said = f"{carried.version_on(on)} on {on}" if spec.platformed else carried.version
        msg = (
            f"{spec.manifest_path}: components.{carried.id} says {said}, but the base {base} "
            f"provides {carried.id} {versions[canonical_name(carried.id)]}; the notes would be wrong"
        )
        raise LockError(msg)
    if not spec.of_kind("pip"):
        return Lock(pins_sha256=pins_sha256(spec), layers=(), base=base, provided=provided)
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if here != TARGET_PYTHON:
        # pip resolves for the interpreter it runs on; the images run Python 3.11.
        msg = f"lock resolves for the images' Python {TARGET_PYTHON}, but runs on Python {here}"
        raise LockError(msg)
    check_index(spec)
    attempts = keep.attempts()
    with tempfile.TemporaryDirectory(prefix="xpu-lock-") as tmp:
        for n, prefer in enumerate(attempts, 1):
            try:
                report = pip_report(spec, Path(tmp), provided, prefer, platform)
                break
            except LockError:
                if n == len(attempts):  # nothing kept, and still no resolution: pip's own error
                    raise
    layers = layers_from_report(spec, report, on)
    return Lock(pins_sha256=pins_sha256(spec), layers=layers, base=base, provided=provided)
