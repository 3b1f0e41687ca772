"""What the attacks on the readers share: the real CLI run under a deadline (a hang is a failure,
and whatever hangs is released after it: a FIFO's reader gets its end of file, a fake registry
stops), the check that an outcome is a user's error (a documented exit code, no traceback, a few
short lines), and the inputs themselves: an OCI layout, a registry's release, advisories, a
release record, each good but for what a test makes hostile."""

from __future__ import annotations

import json
import os
import stat
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from xpu_release.cli import cli

from ..fake_registry import State
from ..guard.strategies import CONFIG_TYPE, LAYER_TYPE, OCI_INDEX, OCI_MANIFEST, REF_NAME, digest_of, dumps

DOCUMENTED = set(range(15)) | {130}  # README's exit codes; 70 is not among them
DEADLINE = 20.0  # seconds one command may take here; every bound trips in well under one
TAG = "25.03"
REF = f"training-cpu-pytorch:{TAG}"
REPO = "ns/training-cpu-pytorch"
CONFIG, LAYER = b"{}", b"layer bytes"


def invoke(root: Path, argv: list[str], *, env: dict[str, str] | None = None,
           unstick: Callable[[], None] = lambda: None, deadline: float = DEADLINE) -> Result:  # fmt: skip
    """The CLI on ``argv`` in ``root``, which must end within ``deadline``: a run still going
    then is a hang, released (``unstick``) and failed."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = CliRunner().invoke(
                cli, ["--root", str(root), *argv], env=env, catch_exceptions=False
            )
        except BaseException as exc:  # handed to the test
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(deadline)
    if worker.is_alive():
        unstick()
        worker.join(deadline)
        pytest.fail(f"{' '.join(argv)[:200]}: still running after {deadline:g} s (it hangs)")
    if "error" in box:
        raise box["error"]
    result: Result = box["result"]
    return result


def release_fifos(folder: Path) -> Callable[[], None]:
    """What unsticks a reader waiting on a FIFO under ``folder``: each FIFO opened for writing
    and closed, so the reader sees its end."""

    def release() -> None:
        for path in folder.rglob("*"):
            try:
                if stat.S_ISFIFO(path.lstat().st_mode):
                    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass  # nobody is reading it

    return release


def a_users_error(result: Result, code: int | None = None) -> None:
    """``result`` is what a user's mistake (or damaged outside data) ends in: a documented exit
    code (``code`` when given), never 70, no traceback, a few short lines on stderr."""
    errors = result.stderr.splitlines()
    assert result.exit_code != 70, result.stderr[-2000:]
    assert result.exit_code in DOCUMENTED, (result.exit_code, result.stderr[:2000])
    assert "Traceback" not in result.output, result.output[-3000:]
    assert "internal error" not in result.stderr
    assert len(errors) <= 25, result.stderr[:2000]
    assert all(len(line) <= 500 for line in errors), max(errors, key=len)[:300]
    if code is not None:
        assert result.exit_code == code, (result.exit_code, result.stderr[:2000])


# --- a release as OCI documents ------------------------------------------------------------------


def image_value(**fields: Any) -> dict[str, Any]:
    """The release's image manifest (its config and one layer), with ``fields`` instead."""
    config = {"mediaType": CONFIG_TYPE, "digest": digest_of(CONFIG), "size": len(CONFIG)}
    layers = [{"mediaType": LAYER_TYPE, "digest": digest_of(LAYER), "size": len(LAYER)}]
    return {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": config, "layers": layers, **fields}


def referrer_value(of: str, **fields: Any) -> dict[str, Any]:
    """An SBOM attached to the image ``of`` (an OCI 1.1 artifact), with ``fields`` instead."""
    made = {
        "artifactType": "application/vnd.cyclonedx+json",
        "annotations": {"k": "v"},
        "subject": {"mediaType": OCI_MANIFEST, "digest": of, "size": 2},
    }
    return image_value(**{**made, **fields})


def layout(root: Path, *, image: Any = None, referrer: dict[str, Any] | None = None,
           referrer_body: str | None = None) -> dict[str, Path]:  # fmt: skip
    """An OCI layout at ``root`` holding the release at TAG (``image``'s manifest, written with
    ``dumps``: a ``Raw`` number goes in as it is) and, when asked, one referrer of it; returns
    where its named files are."""
    blobs = root / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')

    def put(data: bytes) -> str:
        (blobs / digest_of(data)[7:]).write_bytes(data)
        return digest_of(data)

    put(CONFIG), put(LAYER)
    body = dumps(image or image_value()).encode()
    digest = put(body)
    entries: list[dict[str, Any]] = [{"mediaType": OCI_MANIFEST, "digest": digest, "size": len(body),
                                      "annotations": {REF_NAME: TAG}}]  # fmt: skip
    named = {"image": blobs / digest[7:], "layer": blobs / digest_of(LAYER)[7:]}
    if referrer is not None or referrer_body is not None:
        text = (referrer_body or dumps(referrer)).replace("IMAGE", digest).encode()
        entries.append({"mediaType": OCI_MANIFEST, "digest": put(text), "size": len(text)})
        named["referrer"] = blobs / digest_of(text)[7:]
    (root / "index.json").write_text(
        json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries})
    )
    return {**named, "index.json": root / "index.json", "oci-layout": root / "oci-layout"}


def publish_to(state: State, *, image: str | None = None, referrer: str | None = None,
               media: str = OCI_MANIFEST, layer: bytes = LAYER) -> str:  # fmt: skip
    """The release at TAG in the fake registry: ``image`` (the manifest's text; the good one by
    default) and, when given, a ``referrer`` (its text, ``IMAGE`` standing for the image's
    digest), listed by the referrers tag schema (or the API, when the registry has it)."""
    state.auth = False
    for blob in (CONFIG, layer):
        state.blobs[digest_of(blob)] = blob
    body = (image or dumps(image_value(layers=[{"mediaType": LAYER_TYPE, "digest": digest_of(layer),
                                                "size": len(layer)}]))).encode()  # fmt: skip
    digest = digest_of(body)
    state.manifests[(REPO, TAG)] = state.manifests[(REPO, digest)] = (media, body)
    if referrer is not None:
        text = referrer.replace("IMAGE", digest).encode()
        state.manifests[(REPO, digest_of(text))] = (OCI_MANIFEST, text)
        index = {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [{"mediaType": OCI_MANIFEST, "digest": digest_of(text), "size": len(text)}],
        }
        state.manifests[(REPO, digest.replace(":", "-"))] = (OCI_INDEX, json.dumps(index).encode())
    return digest


def registries_for(folder: Path, host: str) -> Path:
    """A registries file naming the fake registry ``host`` (plain HTTP on loopback) as public;
    every other endpoint a closed port."""
    path = folder / "fake-registries.yaml"
    path.write_text(
        "registries:\n"
        f"  public: {{host: '{host}', insecure: true}}\n"
        "  hub: {host: '127.0.0.1:1', insecure: true}\n"
        "  vpc: {hosts: {cn-beijing: '127.0.0.1:1', cn-wulanchabu: '127.0.0.1:1'}, insecure: true}\n"
    )
    return path


# --- advisories and records ----------------------------------------------------------------------

SBOM = json.dumps({"bomFormat": "CycloneDX", "specVersion": "1.6",
                   "components": [{"type": "library", "name": "demo", "version": "1.0",
                                   "purl": "pkg:pypi/demo@1.0"}]}).encode()  # fmt: skip


def advisory(**fields: Any) -> dict[str, Any]:
    """An OSV record affecting every version of PyPI's ``demo`` (which the SBOM holds)."""
    return {"id": "TEST-1", "summary": "demo is affected", "affected": [
        {"package": {"ecosystem": "PyPI", "name": "demo"},
         "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}]}]}], **fields}  # fmt: skip


def zipped(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def without_an_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """``scan`` without Docker: the engine answers that the image is there, and the SBOM the
    gate reads is SBOM (what a build of an image holding PyPI's demo 1.0 would give)."""
    from types import SimpleNamespace

    class Engine:
        def require_image(self, ref: str) -> Any:
            return SimpleNamespace(id="sha256:" + "e" * 64, labels={})

    monkeypatch.setattr("xpu_release.image.engine.Engine.connect", classmethod(lambda cls, *a, **k: Engine()))

    monkeypatch.setattr("xpu_release.image.lock.load_lock", lambda *a, **k: None)
    monkeypatch.setattr("xpu_release.evidence.attest.image_sbom", lambda *a, **k: SBOM)


def evaluation_value(arm: dict[str, Any], comparison: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """A record's ``evaluation`` of REF (image/evaluation.py ``entry``) against REF itself (``diff
    REF REF`` reads it as measured against OLD), one arm's, one comparison's and the entry's own
    fields replaced by ``arm``, ``comparison`` and ``top``."""
    this = "sha256:" + "c" * 64
    plain = {"image": "this", "ref": REF, "variant": "plain", "env": {}, "unsupported": None,
             "median": 1000.0, "warmup": [990.0], "figures": [1000.0, 1010.0, 995.0], **arm}  # fmt: skip
    against = {"variant": "plain", "against": "previous", "against_ref": REF, "ratio": 1.01, "low": 0.98,
               "high": 1.04, "verdict": "within", "rounds": 3, "rounds_needed": None, "note": None,
               "accepted": None, **comparison}  # fmt: skip
    return {
        "status": "passed", "reason": "no regression stops it", "metric": "tokens_per_second",
        "better": "higher", "threshold_percent": 10, "command": ["xpu-bench", "--steps", "30"],
        "method": {"confidence": 0.95}, "rounds": 3, "warmup_rounds": 1, "cpuset": "0-1", "memory_mb": 4096,
        "images": {"this": {"ref": REF, "id": this}}, "arms": [plain], "comparisons": [against], **top,
    }  # fmt: skip


def record_value(**scan: Any) -> dict[str, Any]:
    """A release record of REF whose gate ran and found one vulnerability, its finding with
    ``scan`` instead (an integer ``aliases``: a record that passed the old schema)."""
    finding = {"id": "CVE-2099-1", "aliases": ["TEST-1"], "package": "demo", "installed": "1.0",
               "severity": "high", "fixed": ["1.1"], "purls": ["pkg:pypi/demo@1.0"], "vex": None,
               "justification": "", **scan}  # fmt: skip
    digest = "sha256:" + "d" * 64
    return {
        "ref": REF, "manifest": "manifests/training-cpu-pytorch/25.03.yaml", "manifest_sha256": "m",
        "inputs_sha256": "i", "tested_image_id": "sha256:" + "c" * 64, "digest": digest,
        "published_at": "2026-12-01T00:00:00Z", "complete": True, "floating_moved": [],
        "endpoints": [{"endpoint": "public", "host": "127.0.0.1:1", "version_ref": "h/x:25.03",
                       "floating_refs": [], "status": "verified", "digest": digest}],
        "attachments": {}, "scan": {"status": "passed", "reason": "threshold high", "findings": [finding]},
    }  # fmt: skip
