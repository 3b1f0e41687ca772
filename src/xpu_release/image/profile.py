"""The prefetch profile of an image: the files its workload opens first, recorded from a run in
the engine (``record``), written beside the lock (``images/<image>/<version>/prefetch.txt``)
and checked current (``stale``).

The run is one Python process in a throwaway container with no network, as the smoke test's: an
audit hook (PEP 578) notes each file the interpreter opens (every module's source, every data
file), then the image's pip components are imported, as the smoke test imports them, and the
evaluation's workload runs in the same process (``runpy``), its command as the manifest gives it.
At the end, the shared objects the process mapped (``/proc/self/maps``: the interpreter, the C
extensions and the libraries they load, which no Python hook sees) follow in the order they are
mapped. Each path is the one the layer holds (symbolic links resolved), a regular file, outside
``/proc``, ``/sys``, ``/dev`` and ``/tmp``. The process prints the list as JSON on its last
line, so the engine may be anywhere the client reaches.

What it does not see: files a C library opens by itself (a locale, a device's firmware); they
are fetched when first read, as any file outside the profile.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import BuildFailed, StaleError
from ..guard.generated import is_current, write_generated
from ..guard.reading import Refused, parse_json
from ..guard.shown import shown
from ..manifest import ImageSpec
from .engine import Engine
from .layerform import PROFILE_HEADER, is_profile_path, profile_path, read_profile
from .smoke import VENV

# Run by the image's interpreter: the hook, the imports, the workload, then the list.
_RECORDER = r"""
import json, os, runpy, sys
seen, order = set(), []
def note(path):
    try:
        real = os.path.realpath(path)
    except (TypeError, ValueError, OSError):
        return
    if real in seen or real.startswith(("/proc/", "/sys/", "/dev/", "/tmp/")) or not os.path.isfile(real):
        return
    seen.add(real)
    order.append(real)
def hook(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes)):
        note(os.fsdecode(args[0]))
note(sys.executable)
for module in list(sys.modules.values()):  # what the interpreter imported before the hook
    if isinstance(getattr(module, "__file__", None), str):
        note(module.__file__)
sys.addaudithook(hook)
plan = json.loads(sys.argv[1])
for name in plan["imports"]:
    try:
        __import__(name)
    except Exception as exc:
        print("xpu-profile: import %s failed: %r" % (name, exc), file=sys.stderr)
if plan["command"]:
    sys.argv = plan["command"]
    try:
        runpy.run_path(plan["script"], run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            print("xpu-profile: the workload exited %r" % (exc.code,), file=sys.stderr)
with open("/proc/self/maps") as maps:
    for line in maps:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            note(parts[5].strip())
print()
print(json.dumps(order))
"""


@dataclass(frozen=True, kw_only=True)
class Profile:
    ref: str
    path: Path  # where it is committed
    files: tuple[str, ...]

    def text(self) -> str:
        return PROFILE_HEADER.format(ref=self.ref) + "".join(f"{f}\n" for f in self.files)


def _plan(spec: ImageSpec) -> tuple[str, dict[str, object]]:
    """The interpreter to run and what it runs: the smoke test's imports, then the workload."""
    python = f"{VENV}/bin/python" if spec.pip_install == "venv" else spec.base.python
    imports = [c.import_name for c in spec.of_kind("pip") if c.import_name]
    ev = spec.evaluation
    command: list[str] = list(ev.command) if ev is not None and ev.carry is not None else []
    script = f"/usr/local/bin/{command[0]}" if command else ""
    return python, {"imports": imports, "command": command, "script": script}


def record(root: Path, spec: ImageSpec, engine: Engine, image: str) -> Profile:
    """The profile of ``image`` (the built image of ``spec``), recorded from a run in ``engine``."""
    python, plan = _plan(spec)
    env = [f"{k}={v}" for k, v in dict(spec.env).items()]
    argv = ["env", *env, python, "-c", _RECORDER, json.dumps(plan)]
    out = engine.output(image, argv, purpose="profile")
    last = out.strip().splitlines()[-1] if out.strip() else ""
    try:
        files = parse_json(last, what="the profile run's last line", error=Refused)
    except Refused:
        msg = f"the profile run of {spec.ref} printed no list of files; its output ends: {shown(last[-200:])}"
        raise BuildFailed(msg) from None
    if not isinstance(files, list) or not all(isinstance(f, str) and f.startswith("/") for f in files):
        msg = f"the profile run of {spec.ref} printed something other than a list of paths"
        raise BuildFailed(msg)
    # A file whose name a profile line cannot hold is not prefetched (it is fetched when read).
    kept = tuple(dict.fromkeys(f for f in files if is_profile_path(f)))  # each once, first opened first
    return Profile(ref=spec.ref, path=profile_path(root, spec.image, spec.version), files=kept)


def write(root: Path, profile: Profile) -> bool:
    """Commit-ready: write the profile in the repository (never through a link); True if it changed."""
    data = profile.text().encode()
    if is_current(profile.path, data, what="prefetch profile"):
        return False
    write_generated(profile.path, data, root=root, what="prefetch profile")
    return True


def committed(root: Path, spec: ImageSpec) -> tuple[str, ...]:
    """The profile committed for ``spec``, read (and its every problem named, exit 2) before any
    image runs; StaleError when there is none."""
    path = profile_path(root, spec.image, spec.version)
    rel = path.relative_to(root)
    if not path.is_file():
        msg = f"{rel} is missing: record it with `xpu-release profile {spec.ref}` and commit it"
        raise StaleError(msg)
    return read_profile(path, str(rel))


def stale(root: Path, profile: Profile, committed: tuple[str, ...]) -> None:
    """StaleError naming what differs, when the ``committed`` profile does not list the files the
    run opened (the set: the order is the run's, which threads may vary)."""
    rel = profile.path.relative_to(root)
    if set(committed) == set(profile.files):
        return
    added = sorted(set(profile.files) - set(committed))
    gone = sorted(set(committed) - set(profile.files))
    lines = [f"+ {f}" for f in added[:10]] + [f"- {f}" for f in gone[:10]]
    more = len(added) + len(gone) - len(lines)
    msg = (
        f"{rel} is stale: the workload now opens {len(added)} files it does not list and no longer "
        f"opens {len(gone)} it lists; run `xpu-release profile {profile.ref}`\n" + "\n".join(lines)
        + (f"\n… and {more} more" if more > 0 else "")
    )  # fmt: skip
    raise StaleError(msg)
