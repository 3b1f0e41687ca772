"""pip's resolver as ``lock`` asks it: a dry-run install's report of what it would install for
an image's pins (``--report``), against what its base provides, with pip's own words when it
cannot resolve them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..errors import LockError
from ..manifest import ImageSpec
from ..manifest.model import canonical_name
from ..manifest.platforms import Platform
from .lockfile import TARGET_PYTHON
from .wheels import no_wheel, pip_options

Pins = tuple[tuple[str, str], ...]  # (distribution, version)


def stub_environment(workdir: Path, provided: tuple[tuple[str, str], ...]) -> Path:
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


def pip_report(
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
        interpreter = ["--python", str(stub_environment(workdir, provided))]
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
            [*conflict_cause(proc.stdout)]
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


def conflict_cause(stdout: str) -> list[str]:
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
