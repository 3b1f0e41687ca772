"""Which stage of a multi-stage build made each layer of its image, read from the classic
builder's log.

Every layer the template puts above the ``system`` stage is ``COPY --from=<stage> /out/ /``: the
files of that stage's ``/out``, copied in as they are. So a changed layer can be read from its
stage through the engine's archive API (a few MB for a one-pin bump) instead of out of
``docker save`` of the whole image (which writes and streams every layer, base included). The
archive of ``/out`` and the layer hold the same files, and ``layers.normalize_layer`` makes the
same bytes of either (checked by the integration tests: a one-pin rebuild and a ``--no-cache``
build on a fresh runner give one image id).

The classic builder's log names, for every step, the image it made (`` ---> <id>``); a stage's
image is the one its last step made, and its first line after ``FROM`` names what it starts
from. Nothing here guesses: a layer is attributed to a stage only when the last stage's steps
account for exactly the layers the image has above the image that stage starts from.
"""

from __future__ import annotations

import re
import tarfile
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .bounded import throwaway
from .engine import CONTAINER_LABEL, Engine

_STEP = re.compile(r"Step \d+/\d+ : (?P<instruction>.*)")
_FROM = re.compile(r"FROM\s+\S+(?:\s+AS\s+(?P<name>\S+))?\s*$", re.IGNORECASE)
_MADE = re.compile(r" ---> (?P<id>[0-9a-f]{12,64})\s*$")
_COPY_OUT = re.compile(r"COPY\s+--from=(?P<stage>\S+)\s+/out/\s+/\s*$", re.IGNORECASE)
_MAKES_LAYER = ("RUN", "COPY", "ADD")


@dataclass(frozen=True, kw_only=True)
class BuildLog:
    """What a classic build's log says of its stages."""

    stages: Mapping[str, str] = field(default_factory=dict)  # stage name → the image its last step made
    start: str = ""  # the image the last stage starts from
    steps: tuple[str, ...] = ()  # the last stage's instructions after its FROM, in order


def read_log(lines: Iterable[str]) -> BuildLog:
    """The stages of a build from its log lines (as ``Engine.build`` hands them on)."""
    stages: dict[str, str] = {}
    name: str | None = None
    start = ""
    steps: list[str] = []
    after_from = False
    for line in lines:
        if step := _STEP.match(line):
            instruction = step["instruction"].strip()
            if found := _FROM.match(instruction):
                name, start, steps, after_from = found["name"], "", [], True
            else:
                steps.append(instruction)
                after_from = False
        elif (made := _MADE.match(line)) is not None:
            if after_from:
                start = made["id"]
            if name is not None:
                stages[name] = made["id"]
    return BuildLog(stages=stages, start=start, steps=tuple(steps))


def layer_stages(log: BuildLog, diff_ids: list[str], start_layers: int) -> dict[str, str]:
    """raw diff_id → the stage image whose ``/out`` the layer copied, for the layers of the last
    stage that are ``COPY --from=<stage> /out/ /``. ``start_layers``: how many layers the image
    the last stage starts from has. Empty when the steps do not account for the image's layers
    exactly (then every layer is read from the image's export, as before)."""
    makers = [s for s in log.steps if s.split(maxsplit=1)[0].upper() in _MAKES_LAYER]
    if not log.start or start_layers + len(makers) != len(diff_ids):
        return {}
    out: dict[str, str] = {}
    for diff_id, step in zip(diff_ids[start_layers:], makers, strict=True):
        copied = _COPY_OUT.match(step)
        if copied is not None and copied["stage"] in log.stages:
            out[diff_id] = log.stages[copied["stage"]]
    return out


def content_size(archive: Path) -> int:
    """What the engine would report as the size of a layer of ``archive``'s files: regular files'
    sizes and symbolic links' target lengths (a hard link adds nothing, as a second name of an
    inode adds nothing to the engine's count)."""
    total = 0
    with tarfile.open(archive, mode="r:") as tar:
        for member in tar:
            if member.isreg():
                total += member.size
            elif member.issym():
                total += len(member.linkname.encode())
    return total


def read_out(engine: Engine, stage: str, dest: Path) -> bool:
    """Write the engine's archive of ``/out`` in the image ``stage`` to ``dest`` (a tar whose
    names start ``./``), through a labelled container that is created, never started, and
    removed; False when the image has no ``/out``."""
    from docker.errors import NotFound

    name = f"xpu-release-copy-{uuid.uuid4().hex[:12]}"

    def create() -> object:
        return engine.api.create_container(stage, command=["true"], entrypoint=[], name=name,
                                           labels={CONTAINER_LABEL: "copy"},
                                           network_disabled=True)  # fmt: skip

    with throwaway(engine.client, name, create):
        try:
            stream, _stat = engine.api.get_archive(name, "/out/.", chunk_size=1 << 20)
        except NotFound:
            return False
        with dest.open("wb") as out:
            for chunk in stream:
                out.write(chunk)
        return True
