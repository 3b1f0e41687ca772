"""The evaluation's workload: the ones xpu-release ships for images to carry (``WORKLOADS``,
copied in by the build when a manifest says ``evaluation.carry``), and the one line every
workload prints, read as outside data.

The contract of a workload (xpu-bench, or an image's own tool such as the PPU image's ljperf
behind a wrapper): it prints its figures as one JSON object on the last line of its stdout and
exits 0; a variant it cannot run in this image is ``{"unsupported": "<why>"}``, exit 0. Anything
else (no line, a line that is not such an object, a figure that is not a positive number, a
non-zero exit) is the workload failing, said as such: never a crash of ours.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import EvaluationFailed
from ..guard.limits import (
    MAX_WORKLOAD_FIGURE_NAME,
    MAX_WORKLOAD_FIGURES_KEPT,
    MAX_WORKLOAD_LINE_BYTES,
    MAX_WORKLOAD_LOG_BYTES,
)
from ..guard.reading import Refused, parse_json
from ..guard.shown import shown
from ..manifest import ImageSpec

WORKLOADS_DIR = Path(__file__).with_name("workloads")
WORKLOADS = {"xpu-bench": WORKLOADS_DIR / "xpu_bench.py"}  # name → the file, shipped with the package
SERVING = frozenset({"xpu-bench"})  # the shipped workloads that serve (--serve, --ask SECONDS)
DESTINATION = "/usr/local/bin"  # where a carried workload is installed, under its name

WHY_CHARS = 300  # an "unsupported" reason, as the notes say it


@dataclass(frozen=True, kw_only=True)
class Carried:
    """A workload the image carries: its file here, its name in the build context and the image,
    and its sha256 (in the Dockerfile: a changed workload is a changed image)."""

    name: str
    source: Path
    sha256: str

    @property
    def context_path(self) -> str:
        return f"workloads/{self.name}"

    @property
    def dest(self) -> str:
        return f"{DESTINATION}/{self.name}"


def carried(spec: ImageSpec) -> Carried | None:
    """The workload ``spec``'s image carries (``evaluation.carry``), if any."""
    if spec.evaluation is None or spec.evaluation.carry is None:
        return None
    name = spec.evaluation.carry
    source = WORKLOADS[name]
    return Carried(name=name, source=source, sha256=hashlib.sha256(source.read_bytes()).hexdigest())


def serves(carry: str | None, command: tuple[str, ...]) -> bool:
    """Whether ``command`` runs a carried workload that serves: then an arm is one container
    for the whole evaluation (``served.Served``), else one a run. Every arm compared runs the
    very build this image carries (an image carrying another is not compared), so all serve."""
    return carry in SERVING and bool(command) and command[0] in (carry, f"{DESTINATION}/{carry}")


@dataclass(frozen=True, kw_only=True)
class Figures:
    """One run's figures: every number of the line (the metric among them), and the workload's
    own name and sha256 when it says them."""

    values: dict[str, float]
    workload_sha256: str | None


@dataclass(frozen=True, kw_only=True)
class Unsupported:
    why: str


def read_line(stdout: bytes, metric: str, *, run: str) -> Figures | Unsupported:
    """The last line of a workload's ``stdout``, as a figure or a variant it cannot run;
    ``EvaluationFailed`` naming ``run`` (which image and variant) for anything else. Outside
    data: read through the guarded layer (its size, its nesting, its numbers bounded) and shown
    escaped."""
    text = stdout[-MAX_WORKLOAD_LOG_BYTES:].decode("utf-8", errors="replace").rstrip()
    if not text.strip():
        msg = f"{run}: the workload printed nothing on stdout; it must print its figures as one JSON line"
        raise EvaluationFailed(msg)
    line = text.rsplit("\n", 1)[-1].strip()
    if len(line.encode()) > MAX_WORKLOAD_LINE_BYTES:
        size = len(line.encode())
        msg = (
            f"{run}: the workload's last line is {size} bytes; a line of figures is at most "
            f"{MAX_WORKLOAD_LINE_BYTES}"
        )
        raise EvaluationFailed(msg)
    data = _object(line, run)
    why = data.get("unsupported")
    if why is not None:
        if not isinstance(why, str) or not why.strip():
            msg = f"{run}: the workload's 'unsupported' must say why, as text; got {_shown(why)}"
            raise EvaluationFailed(msg)
        return Unsupported(why=shown(" ".join(why.split()), WHY_CHARS))
    values = {k: float(v) for k, v in data.items() if _number(v)}
    if metric not in data:
        known = ", ".join(sorted(values)) or "none"
        msg = f"{run}: the workload's line has no {metric!r} (its numbers: {shown(known)})"
        raise EvaluationFailed(msg)
    if not _number(data[metric]) or values[metric] <= 0:
        msg = f"{run}: the workload's {metric!r} must be a positive number; got {_shown(data[metric])}"
        raise EvaluationFailed(msg)
    sha = data.get("sha256")
    return Figures(
        values=_kept(values, metric),
        workload_sha256=sha if isinstance(sha, str) and _SHA256.fullmatch(sha) else None,
    )


def _kept(values: dict[str, float], metric: str) -> dict[str, float]:
    """What the record keeps of a run's numbers: the metric, then the first
    ``MAX_WORKLOAD_FIGURES_KEPT`` others with a name of at most ``MAX_WORKLOAD_FIGURE_NAME``
    characters, so that every evaluation the manifest allows writes a record its reader takes."""
    others = [k for k in values if k != metric and len(k) <= MAX_WORKLOAD_FIGURE_NAME]
    return {metric: values[metric], **{k: values[k] for k in others[:MAX_WORKLOAD_FIGURES_KEPT]}}


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _object(line: str, run: str) -> dict[str, Any]:
    """The line as a JSON object, parsed bounded (``guard.reading.parse_json``: its nesting, the
    length of its numbers, no NaN or Infinity)."""
    try:
        data = parse_json(line, what=f"{run}: the workload's last line", error=Refused)
    except Refused as exc:
        msg = f"{exc}: {_shown(line)}"
        raise EvaluationFailed(msg) from None
    if not isinstance(data, dict):
        msg = f"{run}: the workload's last line is JSON but not an object: {_shown(line)}"
        raise EvaluationFailed(msg)
    return data


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _shown(value: Any) -> str:
    """A value of the workload's (parsed JSON, or the line), as a message may echo it: quoted,
    escaped, short."""
    return f"'{shown(value if isinstance(value, str) else json.dumps(value), 80)}'"
