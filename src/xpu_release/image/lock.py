"""``lock``: resolve an image's pip pins with pip's own resolver into a hashed, layered lock.

The lock (``images/<image>/<version>/requirements.lock``) is committed beside the Dockerfile.
It lists every distribution the image installs, with its sha256 and the URL it came from,
grouped into one layer per pinned component (the component and whatever it needs that no
earlier layer installs), so the build can install each layer from a wheelhouse with
``--require-hashes`` and no network.
"""

from __future__ import annotations

import json
import re
import subprocess
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
from .wheels import no_wheel, pip_options

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


def _stub_environment(workdir: Path, provided: tuple[tuple[str, str], ...]) -> Path:
    """A Python environment without pip that looks, to pip, as if the base's distributions were
    installed: resolving against it installs nothing the base provides. Its interpreter."""
    env = workdir / "base-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = env / "lib" / f"python{TARGET_PYTHON}" / "site-packages"
    for name, version in provided:
        info = site / f"{re.sub(r'[^A-Za-z0-9.]+', '_', name)}-{version}.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "INSTALLER").write_text("xpu-release lock (stands for the base image)\n")
    return env / "bin" / "python"


Pins = tuple[tuple[str, str], ...]  # (distribution, version)


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


def _pip_report(
    spec: ImageSpec, workdir: Path, provided: Pins = (), prefer: Pins = (), platform: Platform | None = None
) -> dict[str, Any]:
    """pip's report of what it would install. ``platform``: resolved for it with its wheel tags
    (a platformed lock), the base's distributions held by constraints and left out of the report;
    None: for this machine, against a stand-in of the base's environment (as every lock was)."""
    reqs = workdir / "pins.txt"
    reqs.write_text("".join(c.pin_on(platform or spec.platforms[0]) + "\n" for c in spec.of_kind("pip")))
    report = workdir / "report.json"
    kept: list[str] = []
    if prefer:
        base_has = {canonical_name(n) for n, _ in provided}  # the base's versions always win
        (workdir / "kept.txt").write_text(
            "".join(f"{n}=={v}\n" for n, v in prefer if canonical_name(n) not in base_has)
        )
        kept = ["-c", str(workdir / "kept.txt")]
    if spec.pip_constraints:  # the manifest's floors (a patch past an advisory)
        (workdir / "floors.txt").write_text("".join(c + "\n" for c in spec.pip_constraints))
        kept += ["-c", str(workdir / "floors.txt")]
    constraints = workdir / "provided.txt"
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in provided))
    if platform is not None:  # the base's distributions pinned; dropped from the report below
        interpreter, against = [], ["-c", str(constraints), *pip_options(platform, str(workdir / "target"))]
    elif provided:
        # The base's distributions are installed (in a stand-in environment) and pinned by
        # constraints: a layer may use them, never install another version of them.
        interpreter = ["--python", str(_stub_environment(workdir, provided))]
        against = ["-c", str(constraints)]
    else:
        interpreter, against = [], ["--ignore-installed"]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        *interpreter,  # a general option: before the subcommand
        "install",
        "--dry-run",
        *against,
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "--retries",
        "2",
        "--timeout",
        "30",
        "--report",
        str(report),
        *kept,
        "-r",
        str(reqs),
    ]
    if spec.pip_index_url:
        cmd += ["--index-url", spec.pip_index_url]
    for link in spec.pip_find_links:
        cmd += ["--find-links", link]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    said = no_wheel(spec, platform, proc.stderr) if platform is not None and proc.returncode else None
    if said is not None:
        raise LockError(said)
    if proc.returncode != 0:
        explanation = "\n".join(
            [*_conflict_cause(proc.stdout)]
            + [line for line in proc.stderr.splitlines() if not line.startswith("WARNING: Location")]
        ).strip()
        against_base = ""
        if provided:
            sacred = ", ".join(
                f"{n}=={v}" for n, v in provided if canonical_name(n) in spec.base_provides
            ) or (f"{len(provided)} distributions")
            against_base = (
                f" against what its base provides ({sacred}; every base distribution is a constraint)"
            )
        on = f" for {platform}" if platform is not None else ""
        msg = f"pip cannot resolve the pins of {spec.ref}{on} ({spec.manifest_path}){against_base}:\n"
        msg += explanation
        raise LockError(msg)
    made: dict[str, Any] = json.loads(report.read_text())
    if platform is not None:  # what the base provides is the base's, never a layer's
        base_has = {canonical_name(n) for n, _ in provided}
        made["install"] = [
            i for i in made["install"] if canonical_name(i["metadata"]["name"]) not in base_has
        ]
    return made


def _conflict_cause(stdout: str) -> list[str]:
    """pip says *which* requirements conflict on its informational output ("The conflict is
    caused by:" and the indented lines after it); its errors only say that they do."""
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("The conflict is caused by"):
            block = [line]
            for follow in lines[i + 1 :]:
                if follow and not follow.startswith(" "):
                    break
                if follow.strip():
                    block.append(follow)
            return block
    return []


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
                report = _pip_report(spec, Path(tmp), provided, prefer, platform)
                break
            except LockError:
                if n == len(attempts):  # nothing kept, and still no resolution: pip's own error
                    raise
    layers = layers_from_report(spec, report, on)
    return Lock(pins_sha256=pins_sha256(spec), layers=layers, base=base, provided=provided)
