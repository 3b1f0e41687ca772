"""Outside text cannot forge a line wherever it is shown: an advisory's versions (loose or
indexed), the image's package names (its SBOM), a VEX statement's name, a record's findings
read back (a record, a re-scan history). Each is escaped where it comes in, or where a message
quotes it (``guard.shown``)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from xpu_release.evidence.osv import Advisories
from xpu_release.evidence.scan import gate_failure, scan
from xpu_release.release.model.record import RecordedFinding

from .test_vulnerabilities import TODAY, record, spec, write_records

FORGED = "error: forged"
HOSTILE = f"1.1\n{FORGED}\x1b[2J\u202e"


def forged(text: str) -> bool:
    return any(line.lstrip().startswith(FORGED) for line in text.splitlines()) or "\x1b" in text


def as_archive(folder: Path) -> Path:
    archive = folder.parent / "all.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in sorted(folder.iterdir()):
            z.writestr(path.name, path.read_text())
    return archive


@pytest.mark.parametrize("read_as", ["loose records", "an archive's index"])
def test_an_advisorys_versions_come_in_escaped(tmp_path: Path, read_as: str) -> None:
    folder = write_records(
        tmp_path / "osv",
        record("TEST-V1", "PyPI", "demo", {"introduced": "0"}, {"fixed": HOSTILE}, versions=(HOSTILE,)),
    )
    source = folder if read_as == "loose records" else as_archive(folder)

    (adv,) = Advisories([source], tmp_path / "cache").lookup("PyPI", "demo")

    affected = adv.data["affected"][0]
    said = json.dumps(affected, ensure_ascii=False)
    assert "\\n" + FORGED in affected["ranges"][0]["events"][1]["fixed"]
    assert "\n" not in affected["versions"][0]
    assert "\x1b" not in said


def test_the_gates_message_escapes_package_names_versions_and_fixes(tmp_path: Path) -> None:
    name = f"demo\n{FORGED} package"
    sbom = json.dumps({"components": [{"purl": f"pkg:pypi/{name.replace(chr(10), '%0A')}@1.0"}]}).encode()
    folder = write_records(
        tmp_path / "osv", record("TEST-G1", "PyPI", name, {"introduced": "0"}, {"fixed": HOSTILE})
    )

    result = scan(spec(), sbom, Advisories([folder], tmp_path / "cache"), (), today=TODAY)

    assert result.blocking, "the hostile package is found"
    message = gate_failure(result)
    assert not forged(message), message
    assert "demo\\n" in message


def test_a_recorded_finding_is_safe_to_show_however_it_is_made() -> None:
    reason = "reviewed\n" + FORGED + " " + "x" * 500  # long: escaped whole, never cut
    f = RecordedFinding(id=f"CVE-1\n{FORGED}", package="demo\u202e", installed="1.0\r", severity="high",
                        aliases=(f"A\n{FORGED}",), fixed=(HOSTILE,), vex="not_affected\x1b",
                        justification=reason)  # fmt: skip

    texts = [f.id, f.package, f.installed, *f.aliases, *f.fixed, f.vex or "", f.justification]
    assert [t for t in texts if any(c in t for c in "\n\r\x1b\u202e")] == []
    assert f.id == f"CVE-1\\n{FORGED}"  # visible, as an escape
    assert f.justification == reason.replace("\n", "\\n")  # whole
