"""A real registry for the tests that must see what distribution itself does (Debian's
``docker-registry``, distribution 2.8): started on a free loopback port with its storage in a
temporary folder, without auth, stopped at the end. Never the local stack's registries."""

from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..needs import missing

START_SECONDS = 30.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@contextmanager
def real_registry(folder: Path) -> Iterator[tuple[str, Path]]:
    """``host:port`` of a running distribution registry, and the folder of its storage."""
    binary = shutil.which("docker-registry") or missing(
        "docker-registry is not installed (Debian: docker-registry)"
    )
    port = _free_port()
    data = folder / "data"
    data.mkdir(parents=True)
    config = folder / "config.yml"
    config.write_text(
        "version: 0.1\nlog: {level: error, accesslog: {disabled: true}}\n"
        f"storage:\n  filesystem: {{rootdirectory: {data}}}\n  delete: {{enabled: true}}\n"
        "  maintenance: {uploadpurging: {enabled: false}}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n  secret: {secrets.token_hex(16)}\n"
    )
    log = (folder / "log").open("wb")
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + START_SECONDS
        waiting = threading.Event()  # polled: a port has no event to wait on
        while not _answers(port):
            assert proc.poll() is None, (folder / "log").read_text()
            assert time.monotonic() < deadline, f"docker-registry did not answer in {START_SECONDS} s"
            waiting.wait(0.05)
        yield f"127.0.0.1:{port}", data
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def blob_data(storage: Path, digest: str) -> Path:
    """Where distribution's filesystem driver keeps a blob's bytes."""
    hexpart = digest.removeprefix("sha256:")
    return storage / "docker" / "registry" / "v2" / "blobs" / "sha256" / hexpart[:2] / hexpart / "data"
