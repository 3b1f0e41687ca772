"""How an image's own layers are written: gzip (the default), or eStargz, which a lazy puller
mounts before the layer is downloaded (``oci/estargz.py``), with the image's prefetch profile.

``images/<image>/image.yaml`` chooses (``layers: estargz``) for every version of the image. The
prefetch profile is a committed file beside each version's lock,
``images/<image>/<version>/prefetch.txt``: the files the image's workload opens first, one
absolute path a line, in the order they were first opened (``xpu-release profile`` records it
from a run in the engine). Both are inputs of the image: an eStargz layer's tar holds its TOC,
whose offsets are the codec's output, so the form, the codec that makes the offsets and the
profile are in the inputs digest (``basis``); a gzip image's inputs are what they always were.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import ManifestError, Problem
from ..guard import limits
from ..guard.reading import read_file
from ..guard.shown import quoted
from ..oci.codec import DEFAULT, Codec
from ..oci.estargz import CHUNK, clean

PROFILE_FILE = "prefetch.txt"
PROFILE_HEADER = (
    "# The files this image's workload opens first, in that order: written first in each eStargz\n"
    "# layer, before its .prefetch.landmark, so a lazy puller fetches them at once.\n"
    "# Made by `xpu-release profile {ref}`; review it as a lock. One absolute path a line.\n"
)


@dataclass(frozen=True)
class LayerForm:
    """gzip, or eStargz with a prefetch profile (paths as the image's file system names them)."""

    estargz: bool = False
    prefetch: tuple[str, ...] = ()
    # The codec whose output an eStargz TOC's offsets are: fixed, not the command's --compression
    # (which would make another image of the same inputs).
    codec: Codec = DEFAULT

    def basis(self) -> dict[str, object] | None:
        """What of the form the image's inputs digest holds (None for gzip: as before forms)."""
        if not self.estargz:
            return None
        profile = hashlib.sha256("\n".join(self.prefetch).encode()).hexdigest()
        return {"form": "estargz", "chunk": CHUNK, "codec": self.codec.key, "prefetch": profile}

    @property
    def blob_key(self) -> str:
        """A name for the map diff_id → blob of this form's layers: an eStargz layer's tar (its
        TOC, hence its profile, included) and the codec fix its blob, so any image's eStargz
        layers (an SDK's under its child) are found there, whatever profile wrote them."""
        return f"estargz-{self.codec.key}-{CHUNK >> 20}M" if self.estargz else "gzip"

    @property
    def key(self) -> str:
        """A name for the maps of this form's layers (raw → written, written → blob)."""
        basis = self.basis()
        if basis is None:
            return "gzip"
        return f"estargz-{self.codec.key}-{CHUNK >> 20}M-{str(basis['prefetch'])[:16]}"


GZIP = LayerForm()


def profile_path(root: Path, image: str, version: str) -> Path:
    return root / "images" / image / version / PROFILE_FILE


MAX_PROFILE_PATH = 4096  # characters of a path (Linux's PATH_MAX)
MAX_PROFILE_PROBLEMS = 20  # listed at once; the rest counted


def profile_path_problem(line: str) -> str | None:
    """What keeps ``line`` from being a path a profile holds (None: it is one): absolute, one
    printable line of UTF-8, no backslash, no white space at either end (an edit would hide a
    difference there), at most ``MAX_PROFILE_PATH`` characters, written plainly (as the layer's
    writer keys the file: one spelling a file, so "listed once" means once)."""
    if any("\ud800" <= c <= "\udfff" for c in line):
        return "is not UTF-8"
    if len(line) > MAX_PROFILE_PATH:
        return f"is {len(line):,} characters long; a path has at most {MAX_PROFILE_PATH:,}"
    if not line.startswith("/"):
        return f"{quoted(line)} is not absolute (a path starts with /)"
    if not line.isprintable():
        bad = next(c for c in line if not c.isprintable())
        return f"{quoted(line)} holds the control character U+{ord(bad):04X}"
    if "\\" in line:
        return f"{quoted(line)} holds a backslash"
    if line != line.strip():
        return f"{quoted(line)} begins or ends with white space"
    if line != (plain := "/" + clean(line)):  # the name a layer's writer keys it by (Go's path.Clean)
        return f"{quoted(line)} is not written plainly: write {quoted(plain)}"
    return None


def is_profile_path(line: str) -> bool:
    return profile_path_problem(line) is None


def read_profile(path: Path, display: str) -> tuple[str, ...]:
    """The paths of a prefetch profile (a missing file: none): one a line (lines end at ``\\n``
    alone), comments and blank lines passed over. Every problem is listed, with its line
    (``ManifestError``, exit 2)."""
    if not os.path.lexists(path):
        return ()
    # Anything else there (a link to nothing, a FIFO, a folder) is the guarded reader's to refuse.
    text = read_file(path, what=display, limit=limits.MAX_PROFILE_BYTES, error=ManifestError)
    paths: dict[str, int] = {}  # path → its line
    problems: list[Problem] = []
    for n, raw in enumerate(text.split(b"\n"), start=1):
        line = raw.decode("utf-8", "surrogateescape")
        if not line.strip() or line.startswith("#"):
            continue
        problem = profile_path_problem(line)
        if problem is None and line in paths:
            problem = f"{quoted(line)} is listed before, at line {paths[line]}"
        if problem is not None:
            why = f"{problem}; remake the file with `xpu-release profile`"
            problems.append(Problem(file=display, line=n, column=1, message=why))
        paths.setdefault(line, n)
    if len(problems) > MAX_PROFILE_PROBLEMS:
        more = len(problems) - MAX_PROFILE_PROBLEMS
        problems = [
            *problems[:MAX_PROFILE_PROBLEMS],
            Problem(file=display, message=f"and {more:,} more lines like these"),
        ]
    if problems:
        raise ManifestError(problems)
    return tuple(paths)


def layer_form(root: Path, image: str, version: str, layers: str, extends: str | None = None) -> LayerForm:
    """The form ``image.yaml``'s ``layers`` names, with the version's profile if eStargz: its
    own, else (a bump, a patch) the one of the version it extends, until it records its own."""
    if layers != "estargz":
        return GZIP
    path = profile_path(root, image, version)
    if not os.path.lexists(path) and extends:
        path = profile_path(root, image, extends)
    return LayerForm(estargz=True, prefetch=read_profile(path, str(path.relative_to(root))))
