"""``test``: run testinfra checks inside a throwaway container of the built image.

The generic checks ship with this package (``checks/``, beside this module: every image gets
them, from any repository) and are parametrized from the manifest, written to a JSON file for
the pytest run; image-specific checks live in the repository, ``images/<image>/tests/``. The
container is uuid-named and removed afterwards, even on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, SmokeTestFailed
from ..guard.limits import MAX_DOCUMENT_BYTES, MAX_RECORD_BYTES
from ..guard.reading import Refused, read_file, read_json
from ..guard.trees import Walk
from ..guard.writing import write_bytes
from ..manifest import ImageSpec
from ..manifest.model import canonical_name
from ..manifest.platforms import AMD64, Platform
from ..settings import cache_dir
from .engine import Engine, LineSink
from .lock import Lock

VENV = "/opt/venv"
CHECKS = Path(__file__).with_name("checks")  # the generic checks, shipped with the package


@dataclass(frozen=True, kw_only=True)
class SmokeResult:
    ref: str
    image_id: str
    passed: int
    failed: tuple[str, ...]
    seconds: float


def check_spec(
    spec: ImageSpec, image_id: str, provided: tuple[tuple[str, str], ...] = (), platform: Platform = AMD64
) -> dict[str, Any]:
    """What the generic checks verify of ``platform``'s image, taken from the manifest and, for
    what the base provides, from the lock (which asked the pinned base)."""
    venv = spec.pip_install == "venv"
    python = f"{VENV}/bin/python" if venv else spec.base.python
    labels = {
        "org.opencontainers.image.title": spec.image,
        "org.opencontainers.image.version": spec.version,
        "io.xpu-release.manifest.sha256": spec.content_hash,
        **{f"io.xpu-release.component.{c.id}": c.version for c in spec.components},
    }
    return {
        "ref": spec.ref,
        "image_id": image_id,
        "platform": platform.name,
        "machine": platform.machine,
        "python": python,
        # A venv has its pip; an SDK image's own interpreter may have none (pip checks then skip).
        "pip_path": f"{VENV}/bin/pip" if venv else None,
        "pip": [
            {"package": c.package, "version": c.version_on(platform), "import": c.import_name}
            for c in spec.of_kind("pip")
        ],
        "env": {
            **dict(spec.env),
            **({"VIRTUAL_ENV": VENV} if venv else {}),
            "PIP_CONSTRAINT": "/etc/xpu-release/pip-constraints.txt",
        },
        # Every distribution the base provides (unchanged in the image), and those no layer may
        # replace (a pip install of another version must fail).
        "provided": [{"name": n, "version": v} for n, v in provided],
        "sacred": [{"name": n, "version": v} for n, v in provided if canonical_name(n) in spec.base_provides],
        "files": list(spec.files),
        "tools": list(spec.tools),
        "artifacts": [{"id": c.id, "dest": c.dest} for c in spec.of_kind("artifact") if c.format != "deb"],
        "labels": labels,
    }


def _failures(junit: Path) -> tuple[int, list[str]]:
    if not junit.is_file():
        return 0, ["the smoke run produced no report"]
    root = ET.parse(junit).getroot()
    passed, failed = 0, []
    for case in root.iter("testcase"):
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            first = (problem.get("message") or "").splitlines()
            failed.append(f"{case.get('name')}: {first[0] if first else 'failed'}")
        elif case.find("skipped") is None:
            passed += 1
    return passed, failed


@dataclass(frozen=True, kw_only=True)
class StagedRun:
    """A smoke run laid out in a folder of its own: the checks' JSON, an empty pytest ini and a
    copy of each suite (``suites``)."""

    folder: Path
    spec_file: Path
    ini: Path
    suites: tuple[Path, ...]

    def argv(self, hosts: str, *more: str, suites: tuple[Path, ...] = ()) -> list[str]:
        """The pytest command that runs ``suites`` (default: every one) against testinfra's
        ``hosts``."""
        return [
            sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE",
            "-p", "xpu_release.image.smoke_plugin", f"--xpu-spec={self.spec_file}", "-c", str(self.ini),
            *more, f"--hosts={hosts}", "--rootdir", str(self.folder / "suites"),
            *map(str, suites or self.suites),
        ]  # fmt: skip


def stage_run(
    root: Path,
    spec: ImageSpec,
    image_id: str,
    provided: tuple[tuple[str, str], ...],
    folder: Path,
    platform: Platform = AMD64,
) -> StagedRun:
    """Lay out a smoke run of ``image_id`` in ``folder``. ``provided``: what the base provides,
    as the lock the image was built from says (a manifest edited since, e.g. a wrong pin under
    test, leaves the image and its lock as they were)."""
    spec_file = folder / "spec.json"
    spec_file.write_text(json.dumps(check_spec(spec, image_id, provided, platform), indent=2))
    # Our own ini file: the repository's pytest settings (plugins the user may not have, such as
    # pytest-timeout's `timeout`) are the suite's, not the smoke run's.
    ini = folder / "pytest.ini"
    ini.write_text("[pytest]\n", encoding="utf-8")
    # The checks run from a copy of their own, so that pytest loads only the suites' own conftest
    # files: the repository's test suite (tests/conftest.py, which needs the dev extras) is not
    # the smoke run's, and a release job installs no dev extras.
    staged = []
    for name, suite in suites(root, spec):
        shutil.copytree(
            suite, folder / "suites" / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
        staged.append(folder / "suites" / name)
    return StagedRun(folder=folder, spec_file=spec_file, ini=ini, suites=tuple(staged))


def smoke_test(
    root: Path, spec: ImageSpec, lock: Lock, engine: Engine, *, on_line: LineSink, platform: Platform = AMD64
) -> SmokeResult:
    """Run the checks against ``platform``'s image of ``spec`` (``Platform.local_ref``), in a
    container of it (under emulation on a machine of another architecture); ``lock``: the
    platform's section it was built from, which says what its base provides."""
    started = time.monotonic()
    ref = platform.local_ref(spec.ref)
    image = engine.require_image(ref)
    # The checks as they are staged (a deep or unreadable folder of them refused before a copy
    # recurses into it), hashed once: the marker names the checks that ran.
    tests = tests_sha256(root, spec)
    with tempfile.TemporaryDirectory(prefix="xpu-smoke-") as tmp:
        run = stage_run(root, spec, image.id, lock.provided, Path(tmp), platform)
        codes, output = _run_suites(run, engine, image.id, ref, on_line)
        counted = [_failures(run.folder / f"junit-{n}.xml") for n in range(len(codes))]
        passed, failed = sum(n for n, _ in counted), [f for _, fs in counted for f in fs]
    if any(codes) or failed:
        listing = "\n".join(f"  - {f}" for f in failed) or "  (see the log above)"
        what = f"{spec.ref} on {platform}" if spec.platformed else spec.ref
        msg = f"{len(failed)} smoke check(s) failed for {what}; it must not be published:\n{listing}"
        raise SmokeTestFailed(msg, details=output)
    result = SmokeResult(
        ref=ref, image_id=image.id, passed=passed, failed=(), seconds=time.monotonic() - started
    )
    _mark_tested(spec, image.id, tests, passed)
    return result


def _run_suites(
    run: StagedRun, engine: Engine, image_id: str, ref: str, on_line: LineSink
) -> tuple[list[int], str]:
    """Each suite in a container of its own, all at once where the engine has more than one CPU
    (the generic checks and the image's own each import torch and run for seconds; the pytest
    runs here only drive them); all in one container on an engine of one CPU. Their exit codes,
    and what they said (on screen, each line named by its suite). The containers are of
    ``image_id``: the image the marker names."""
    groups = [(s,) for s in run.suites] if engine.cpu_count() > 1 else [run.suites]
    said: list[list[str]] = [[] for _ in groups]
    shown = threading.Lock()
    procs: list[subprocess.Popen[str]] = []
    readers: list[threading.Thread] = []

    def follow(n: int, proc: subprocess.Popen[str], tag: str) -> None:
        """Drains the run's output to its end whatever showing it does (a closed terminal): a
        pipe left full would stop the run, and this command with it, for ever."""
        assert proc.stdout is not None
        for line in proc.stdout:
            said[n].append(tag + line)
            with shown, contextlib.suppress(Exception):
                on_line(f"{tag}{line.rstrip()}")

    def start(n: int, suites: tuple[Path, ...], name: str) -> None:
        suite = suites[0].relative_to(run.folder / "suites").as_posix() if len(groups) > 1 else ""
        on_line(f"smoke-testing {ref} in container {name}" + (f": {suite}" if suite else ""))
        junit = f"--junitxml={run.folder / f'junit-{n}.xml'}"
        cmd = run.argv(f"docker://{name}", "-o", "junit_family=xunit1", junit, suites=suites)
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      errors="replace"))  # fmt: skip
        tag = f"[{suite}] " if suite else ""
        readers.append(threading.Thread(target=follow, args=(n, procs[-1], tag), daemon=True))
        readers[-1].start()

    with contextlib.ExitStack() as stack:
        try:
            for n, suites in enumerate(groups):
                start(n, suites, stack.enter_context(engine.container(image_id, purpose="smoke")))
            for proc, reader in zip(procs, readers, strict=True):
                proc.wait()
                reader.join()
        finally:  # interrupted, or a container refused: no run outlives its container
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    # A suite run alone that holds no test (an image's tests/ of helpers only) has nothing to
    # fail: pytest's 5, "no tests collected", as it was when it ran beside the generic checks.
    codes = [0 if proc.returncode == 5 and len(groups) > 1 else proc.returncode for proc in procs]
    return codes, "".join(line for lines in said for line in lines)


def suites(root: Path, spec: ImageSpec) -> list[tuple[str, Path]]:
    """The suites ``spec``'s image is checked with: the generic checks of this package, and the
    image's own from the repository; each with the name it runs under (its test ids read
    ``checks/…`` and ``images/<image>/tests/…``)."""
    found = [("checks", CHECKS)]
    image_tests = root / "images" / spec.image / "tests"
    if image_tests.is_dir():
        found.append((f"images/{spec.image}/tests", image_tests))
    return found


def tests_sha256(root: Path, spec: ImageSpec) -> str:
    """The checks themselves: a changed check means the image must be tested again."""
    h = hashlib.sha256()
    for name, folder in suites(root, spec):
        walk = Walk(folder)  # without recursion: a tree of any depth is no RecursionError
        checks = sorted(f.path for f in walk if not f.is_dir and f.path.name.endswith(".py"))
        if walk.skipped:
            msg = (f"{name}: {walk.skipped} folder(s) of the checks could not be read, or are deeper "
                   f"than {walk.max_depth} levels; fix or remove them")  # fmt: skip
            raise ConfigError(msg)
        for path in checks:
            rel = f"{name}/{path.relative_to(folder)}"  # a check that is no file (a FIFO) is named
            check = read_file(path, what=rel, limit=MAX_DOCUMENT_BYTES, error=ConfigError)
            h.update(rel.encode() + b"\0" + check)
    return h.hexdigest()


def already_tested(root: Path, spec: ImageSpec, image_id: str) -> bool:
    data = _read_marker(image_id)
    return bool(
        data.get("manifest_sha256") == spec.content_hash
        and data.get("tests_sha256") == tests_sha256(root, spec)
    )


def _marker(image_id: str) -> Path:
    return cache_dir() / "tested" / f"{image_id.removeprefix('sha256:')}.json"  # written within the cache


def _read_marker(image_id: str) -> dict[str, Any]:
    """What the last passing smoke run of ``image_id`` recorded ({} if none did)."""
    path = _marker(image_id)
    try:
        data = read_json(path, what=str(path), limit=MAX_RECORD_BYTES, error=Refused)
    except Refused:
        return {}  # none, or damaged: then the image counts as untested, and is tested again
    return data if isinstance(data, dict) else {}


def _mark_tested(spec: ImageSpec, image_id: str, tests: str, passed: int) -> None:
    path = _marker(image_id)
    data = {
        "ref": spec.ref,
        "image_id": image_id,
        "tests_sha256": tests,
        "manifest_sha256": spec.content_hash,
        "passed": passed,
        "at": time.time(),
    }
    write_bytes(path, json.dumps(data).encode(), within=cache_dir(), what="smoke test marker")


def require_tested(spec: ImageSpec, image_id: str) -> None:
    """Publish only what passed its smoke tests: this very image, for this very manifest."""
    if _read_marker(image_id).get("manifest_sha256") != spec.content_hash:
        msg = (
            f"{spec.ref} ({image_id[:19]}) has not passed its smoke tests for the current manifest; "
            f"run `xpu-release test {spec.ref}` first"
        )
        raise SmokeTestFailed(msg)
