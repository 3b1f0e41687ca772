"""The release record: a failed run never damages a better record, two runs never share a
temporary file, and a record that is not what xpu-release wrote is exit 12 naming what is wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from xpu_release.errors import DamagedFileError
from xpu_release.release.model import record as records
from xpu_release.release.model import recordschema
from xpu_release.release.model.record import EndpointRecord, ReleaseRecord

from ..helpers import run

DIGEST = "sha256:" + "d" * 64
IMAGE = "sha256:" + "c" * 64


def endpoint(name: str, status: str, digest: str | None = DIGEST) -> EndpointRecord:
    return EndpointRecord(endpoint=name, host="127.0.0.1:1", version_ref=f"h/{name}/x:1",
                          floating_refs=(), status=status, digest=digest)  # type: ignore[arg-type]  # fmt: skip


COMPLETE = ReleaseRecord(
    ref="training-cpu-pytorch:25.03", manifest="manifests/training-cpu-pytorch/25.03.yaml",
    manifest_sha256="m", inputs_sha256="i", tested_image_id=IMAGE, digest=DIGEST,
    published_at="2026-12-01T00:00:00Z", complete=True, floating_moved=(),
    endpoints=(endpoint("public", "verified"), endpoint("vpc/cn-beijing", "verified")),
    attachments={"sbom": "sha256:" + "5" * 64, "provenance": "sha256:" + "6" * 64},
)  # fmt: skip
# A later run with a wrong ca_file for the public endpoint: nothing done anywhere.
FAILED = replace(
    COMPLETE, digest=None, complete=False, attachments={},
    endpoints=(endpoint("public", "failed", None), endpoint("vpc/cn-beijing", "planned", None)),
)  # fmt: skip


def test_a_failed_run_writes_beside_a_complete_record_never_over_it(tmp_path: Path) -> None:
    path = tmp_path / "25.03.json"
    records.keep(COMPLETE, path)

    written = records.keep(FAILED, path)

    assert records.read(path) == COMPLETE
    assert written == records.attempt_path(path)
    assert records.read(written) == FAILED


def test_a_record_at_least_as_complete_replaces_it_and_the_attempt_goes(tmp_path: Path) -> None:
    path = tmp_path / "25.03.json"
    records.keep(FAILED, path)
    staged = replace(FAILED, digest=DIGEST, endpoints=(endpoint("public", "staged"), endpoint("b", "failed")))
    records.keep(staged, path)
    assert records.keep(FAILED, path) == records.attempt_path(path)  # less done: beside

    assert records.keep(COMPLETE, path) == path
    assert records.read(path) == COMPLETE
    assert not records.attempt_path(path).exists()


def test_a_damaged_record_is_replaced_by_any_run(tmp_path: Path) -> None:
    path = tmp_path / "25.03.json"
    path.write_text("{ truncated")

    assert records.keep(FAILED, path) == path
    assert records.read(path) == FAILED


def test_runs_writing_one_record_at_once_never_lose_a_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "25.03.json"
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(50):
                records.write(COMPLETE, path)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    assert records.read(path) == COMPLETE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["25.03.json"]  # no temporary left


def _edit(change: str) -> str:
    data = json.loads(json.dumps(COMPLETE.to_json()))
    exec(change, {"d": data})
    return json.dumps(data)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (_edit("d['attachments'] = 'sbom'"), "attachments: 'sbom' is not of type 'object'"),
        (_edit("d['endpoints'][0]['version_ref'] = None"), "endpoints.0.version_ref: None is not of type"),
        (_edit("d['digest'] = 'sha256:abc'"), "digest: 'sha256:abc' does not match"),
        (_edit("d['endpoints'][1]['digest'] = 'sha256:' + 'D' * 64"), "endpoints.1.digest:"),
        (_edit("d['endpoints'] = {}"), "endpoints: {} is not of type 'array'"),
        (_edit("d['complete'] = 'yes'"), "complete: 'yes' is not of type 'boolean'"),
        (_edit("d['endpoints'][0]['status'] = 'done'"), "endpoints.0.status: 'done' is not one of"),
        (_edit("d['attachments']['signature'] = d['digest']"), "attachments: 'signature' is not one of"),
        (_edit("d['surprise'] = 1"), "Additional properties are not allowed ('surprise'"),
        (_edit("d['endpoints'][0]['seconds'] = -1"), "endpoints.0.seconds: -1 is less than the minimum"),
        ("[" * 100_000 + "]" * 100_000, "nested 100000 levels deep"),
    ],
)
def test_every_shape_of_damage_is_exit_12_naming_the_file_and_the_field(
    repo: Path, tmp_path: Path, content: str, why: str
) -> None:
    path = tmp_path / "record.json"
    path.write_text(content)

    with pytest.raises(DamagedFileError) as damaged:
        records.read(path)
    result = run(repo, "notes", "training-cpu-pytorch:25.03", "--record", str(path))

    assert str(path) in damaged.value.message
    assert why in damaged.value.message
    assert result.exit_code == 12
    assert "Traceback" not in result.output
    assert len(result.stderr) < 1000


@pytest.mark.parametrize("shape", ["directory", "fifo", "dangling-link"])
@pytest.mark.parametrize("command", ["status", "verify"])
def test_a_record_path_that_is_no_file_is_exit_12_not_silently_ignored(
    repo: Path, tmp_path: Path, shape: str, command: str
) -> None:
    path = records.default_path(repo, "training-cpu-pytorch", "25.03")
    path.parent.mkdir(parents=True)
    if shape == "directory":
        path.mkdir()
    elif shape == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(tmp_path / "gone.json")

    closed = tmp_path / "nowhere.yaml"  # never asked: the record is read first
    closed.write_text(
        "registries:\n  public: {host: '127.0.0.1:1', insecure: true}\n"
        "  vpc: {regions: [cn-beijing], hosts: {cn-beijing: '127.0.0.1:1'}, insecure: true}\n"
    )

    result = run(repo, "--registries", str(closed), command, "training-cpu-pytorch:25.03")

    assert result.exit_code == 12, result.output
    assert str(path) in result.stderr
    assert "Traceback" not in result.output


def _gated() -> ReleaseRecord:
    """A release whose gate ran: every kind of document, and the scan as the gate records it."""
    from xpu_release.evidence.attachment import ALL_KINDS
    from xpu_release.evidence.scan import Finding, Package, ScanResult, record_entry
    from xpu_release.evidence.vex import Purl

    deb = Purl.parse("pkg:deb/debian/bash@5.2.15-2%2Bb7?arch=amd64&distro=debian-12")
    package = Package(ecosystem="Debian:12", name="bash", version="5.2.15-2", purl=deb, binaries=("bash",),
                      members=(deb,))  # fmt: skip
    finding = Finding(package=package, ids=("CVE-2099-1", "TEST-1"), summary="s", level="high", score=7.5,
                      rated_by="v", fixed=("6",), exception=None, note="", blocking=False)  # fmt: skip
    from xpu_release.evidence.osv import Counts

    result = ScanResult(ref=COMPLETE.ref, threshold="high", fail_on_unknown=True, findings=(finding,),
                        stale=(), packages=1, sources=("osv",), counts=Counts())  # fmt: skip
    return replace(COMPLETE, attachments={k: f"sha256:{n}" + "5" * 63 for n, k in enumerate(ALL_KINDS)},
                   scan=record_entry(result))  # fmt: skip


@pytest.mark.parametrize("record", [COMPLETE, FAILED, _gated()], ids=["complete", "failed", "gated"])
def test_the_record_written_by_this_version_passes_its_own_schema(
    tmp_path: Path, record: ReleaseRecord
) -> None:
    path = tmp_path / "r.json"
    records.write(record, path)

    assert recordschema.shape_problem(json.loads(path.read_text())) is None
    assert records.read(path) == record


def test_reading_a_record_never_compiles_the_iri_grammars_yet_iris_are_still_checked(tmp_path: Path) -> None:
    """Importing jsonschema compiled three Earley parsers of RFC 3987 (1 s of every `status` and
    `verify`); a record has no IRI, so reading one defers them, and an SBOM's IRIs, checked by
    the same jsonschema in the same process, are still checked once one is met."""
    path = tmp_path / "r.json"
    records.write(COMPLETE, path)
    probe = f"""
import json, sys
from pathlib import Path
from xpu_release.release.model import record
assert record.read(Path({str(path)!r})).digest == {DIGEST!r}
compiled = "rfc3987_syntax.syntax_helpers" in sys.modules
import jsonschema
checker = jsonschema.FormatChecker()
cases = [("not an iri", "iri"), ("https://例え.jp/パス?q=1", "iri"),
         ("a b", "iri-reference"), ("../x#y", "iri-reference")]
print(json.dumps([compiled, *(checker.conforms(v, f) for v, f in cases)]))
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr

    assert json.loads(out.stdout) == [False, False, True, False, True]
