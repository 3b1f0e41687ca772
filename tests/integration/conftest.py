"""The integration suite runs against the real local stack (ci/local-stack.sh): a Docker engine
and distribution registries on loopback. With CI=true a missing stack fails the run."""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import shutil
import subprocess
import sys
import tarfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ..needs import missing

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "fixture"
# The fixture image's own smoke checks run inside its container, not here.
collect_ignore = ["fixture"]


def _stack_problem() -> str | None:
    if not os.environ.get("XPU_RELEASE_REGISTRIES"):
        return 'XPU_RELEASE_REGISTRIES is not set: run `eval "$(ci/local-stack.sh env)"`'
    try:
        import docker

        docker.from_env(version="auto").ping()
    except Exception as exc:
        return f"no Docker engine ({type(exc).__name__}): run ci/local-stack.sh up"
    return None


@pytest.fixture(scope="session", autouse=True)
def stack() -> None:
    problem = _stack_problem()
    if problem:
        missing(f"the local stack: {problem}")  # fails in CI; skips only a developer without it


@dataclass(frozen=True)
class Cli:
    root: Path
    env: dict[str, str]

    def run(
        self, *args: str, check: bool = False, env: dict[str, str] | None = None, timeout: float = 900
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "xpu_release", "--root", str(self.root), *args],
            capture_output=True,
            text=True,
            env={**self.env, **(env or {})},
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            pytest.fail(f"xpu-release {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
        return proc

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """The command as a terminal starts it, to be signalled: SIGINT at its default, whatever
        this test process inherited (a background job of a non-interactive shell, as some CI
        runners start scripts, inherits SIGINT *ignored*, and a child keeps that)."""
        return subprocess.Popen(
            [sys.executable, "-m", "xpu_release", "--root", str(self.root), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            preexec_fn=_default_signals,
        )


def _default_signals() -> None:
    """In the child, before it runs: the signals a test sends at their default dispositions."""
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


class _ArtifactHandler(BaseHTTPRequestHandler):
    token = ""
    body = b""

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {self.token}":
            self.send_response(401)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


def _tarball(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@dataclass(frozen=True)
class ArtifactServer:
    url: str
    token: str
    sha256: str


@pytest.fixture(scope="session")
def artifact_server() -> Iterator[ArtifactServer]:
    """A private artifact server on loopback that wants a bearer token."""
    token = "artifact-token-" + secrets.token_hex(12)
    body = _tarball({"hello.txt": b"hello from the artifact server\n"})
    handler = type("Handler", (_ArtifactHandler,), {"token": token, "body": body})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ArtifactServer(
            url=f"http://127.0.0.1:{server.server_address[1]}/blob/1.0/blob.tar.gz",
            token=token,
            sha256=hashlib.sha256(body).hexdigest(),
        )
    finally:
        server.shutdown()


def make_repo(dst: Path, artifact: ArtifactServer) -> Path:
    """A copy of the repository plus the xpu-fixture image, rendered and locked. No test suite:
    the generic smoke checks come with the package, as they do for any repository."""
    for name in ("manifests", "templates", "images", "schema"):
        shutil.copytree(ROOT / name, dst / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "registries.yaml", dst / "registries.yaml")
    # The fixture image is laid out as any image of a repository: its manifest (with the
    # artifact server's address filled in) and its own smoke checks beside it.
    manifest = (FIXTURE / "manifests" / "xpu-fixture" / "1.0.yaml").read_text()
    manifest = manifest.replace("{artifact_url}", artifact.url).replace("{artifact_sha256}", artifact.sha256)
    (dst / "manifests" / "xpu-fixture").mkdir()
    (dst / "manifests" / "xpu-fixture" / "1.0.yaml").write_text(manifest)
    shutil.copytree(FIXTURE / "images" / "xpu-fixture", dst / "images" / "xpu-fixture")
    return dst


SDK = "pytorch-cpu-sdk:2.13.0"
# The CPU family declares an evaluation (#41). It is measured for real once, by
# tests/integration/test_evaluate.py (and by ci/release-local.sh, the main job); every other
# release of the family in this suite skips it, as a user would say why: each would cost minutes.
NO_EVALUATE = ("--no-evaluate", "the evaluation is measured by tests/integration/test_evaluate.py")


@pytest.fixture(scope="session")
def fixture_cli(tmp_path_factory: pytest.TempPathFactory, artifact_server: ArtifactServer) -> Cli:
    root = make_repo(tmp_path_factory.mktemp("fixture") / "repo", artifact_server)
    env = {**os.environ, "XPU_RELEASE_ARTIFACT_TOKEN": artifact_server.token}
    env.pop("XPU_RELEASE_ROOT", None)
    cli = Cli(root=root, env=env)
    cli.run("render", "xpu-fixture:1.0", check=True)
    cli.run("lock", "xpu-fixture:1.0", check=True)
    # The CPU family, parents first: the SDK stand-in is released to the stack (training-cpu-
    # pytorch builds on the digest it is published with). The committed locks pin the digests of
    # the stack they were made on; a stack whose debootstrap met other Debian package versions
    # serves another base: the copy is re-locked (the committed locks are left as they are), as
    # ci/release-local.sh does.
    for ref in (SDK, "training-cpu-pytorch:25.03"):
        moved = cli.run("lock", ref, "--check")
        if moved.returncode == 4 and ("has moved" in moved.stderr or "is not served" in moved.stderr):
            cli.run("lock", ref, check=True)
        if ref == SDK:
            cli.run("release", SDK, *NO_EVALUATE, check=True, timeout=1800)
    return cli


CPU = "training-cpu-pytorch:25.03"


@dataclass(frozen=True)
class Family:
    """The CPU family's month one, released parents first to a namespace of its own."""

    cli: Cli
    regs: Path  # the registries file that names the namespace
    namespace: str
    record: dict[str, Any]  # training-cpu-pytorch:25.03's release record (`release --json`)


@pytest.fixture(scope="session")
def family(fixture_cli: Cli, tmp_path_factory: pytest.TempPathFactory) -> Family:
    """One release of SDK 2.13.0 and training-cpu-pytorch:25.03 for the session: the attestations
    read it, and the second month and the evaluation start from it (two releases of the family
    cost a minute). Without the evaluation (``NO_EVALUATE``): test_evaluate.py releases 25.03
    again with it."""
    from .test_publish import registries_file

    namespace = "m" + uuid.uuid4().hex[:10]
    regs = registries_file(tmp_path_factory.mktemp("family") / "regs.yaml", namespace)
    fixture_cli.run("--registries", str(regs), "release", SDK, *NO_EVALUATE, check=True, timeout=1800)
    release = fixture_cli.run("--registries", str(regs), "release", CPU, "--json", *NO_EVALUATE, timeout=1800)
    assert release.returncode == 0, release.stderr
    record = json.loads(release.stdout)["record"]
    return Family(cli=fixture_cli, regs=regs, namespace=namespace, record=record)


@pytest.fixture(scope="session")
def built_fixture(fixture_cli: Cli) -> subprocess.CompletedProcess[str]:
    """xpu-fixture:1.0 built once for the session (a rebuild from scratch)."""
    return fixture_cli.run("build", "xpu-fixture:1.0", "--rebuild", check=True)


@pytest.fixture(scope="module")
def tested(fixture_cli: Cli, built_fixture: object) -> Cli:
    """The repository copy, with xpu-fixture:1.0 built and smoke-tested (publish needs both)."""
    fixture_cli.run("test", "xpu-fixture:1.0", check=True)
    return fixture_cli


@pytest.fixture(scope="session")
def engine() -> object:
    from xpu_release.image.engine import Engine

    return Engine.connect()


HUB_BASE = "127.0.0.1:15000/base/debian/bookworm-python:12"


@pytest.fixture(scope="session")
def hub_base() -> str:
    """The stack's base image by its tag, in the engine (builds pull it by digest, untagged):
    for the tests that make other images out of it."""
    from xpu_release.image.engine import Engine

    Engine.connect().pull(HUB_BASE)
    return HUB_BASE
