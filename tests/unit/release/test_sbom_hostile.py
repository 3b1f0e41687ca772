"""An SBOM read from a registry is outside data: whatever bytes the SBOM referrer carries,
``watch`` either scans them as the CycloneDX SBOM they are or says they cannot be scanned
(exit 7, ``VerifyFailed``); it never fails otherwise. Hypothesis writes the bytes: any JSON,
and CycloneDX documents whose components carry generated package URLs, versions and
properties."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xpu_release.errors import VerifyFailed
from xpu_release.evidence.osv import Advisories
from xpu_release.evidence.scan import scan
from xpu_release.manifest import Repo
from xpu_release.release.watching.published import read_sboms

ROOT = Path(__file__).resolve().parents[3]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
NAMES = st.sampled_from(["accelerate", "openssl", "libssl3", "bash", "Flash_Attn"]) | st.text(max_size=12)
VERSIONS = st.sampled_from(["1.5.2", "3.0.20-1~deb12u2", "1:2.3-4", "2.13.0+cpu", "", "v!"]) | st.text(
    max_size=12
)
PURLS = (
    st.builds(lambda n, v: f"pkg:pypi/{n}@{v}", NAMES, VERSIONS)
    | st.builds(
        lambda n, v, q: f"pkg:deb/debian/{n}@{v}?arch=amd64&distro={q}",
        NAMES,
        VERSIONS,
        st.sampled_from(["debian-12", "debian-", "ubuntu-22", ""]) | st.text(max_size=8),
    )
    | st.text(max_size=30)
)
COMPONENT: st.SearchStrategy[dict[str, Any]] = st.deferred(
    lambda: st.fixed_dictionaries({"purl": PURLS}, optional=COMPONENT_KEYS)
)
COMPONENT_KEYS: dict[str, st.SearchStrategy[Any]] = {
    "properties": st.lists(
        st.fixed_dictionaries(
            {
                "name": st.sampled_from(["io.xpu-release:source-version"]) | st.text(max_size=8),
                "value": JSON,
            }
        ),
        max_size=2,
    ),
    "name": JSON,
    "components": st.lists(COMPONENT | JSON, max_size=3) | JSON,  # an assembly's, nested
}
CYCLONEDX = st.builds(
    lambda cs: {"bomFormat": "CycloneDX", "specVersion": "1.6", "components": cs},
    st.lists(COMPONENT | JSON, max_size=6) | JSON,
)


@pytest.fixture(scope="module")
def advisories(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("osv")
    (folder / "r.json").write_text(
        json.dumps(
            {
                "id": "TEST-1",
                "affected": [
                    {
                        "package": {"ecosystem": "PyPI", "name": "accelerate"},
                        "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}]}],
                    }
                ],
            }
        )
    )
    found = Advisories([folder], tmp_path_factory.mktemp("cache"))
    yield found
    found.close()


def outcome(payload: bytes, advisories: Advisories) -> str:
    """ "scanned", or why the SBOM cannot be (anything else raised fails the test)."""
    spec = Repo(ROOT).load_ref("training-cpu-pytorch:25.03")
    try:
        read_sboms((payload,), "public: training-cpu-pytorch:25.03")
    except VerifyFailed as exc:
        return exc.message
    scan(spec, payload, advisories, (), today=date(2026, 12, 3))
    return "scanned"


@given(document=JSON | CYCLONEDX)
def test_any_sbom_is_scanned_or_refused_by_name_never_a_crash(document: Any, advisories: Advisories) -> None:
    said = outcome(json.dumps(document).encode(), advisories)

    assert said == "scanned" or said.endswith("it cannot be scanned"), said
