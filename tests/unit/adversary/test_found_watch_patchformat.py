"""Found by the adversary (#39): a ``release.patch`` that says what the manifest does not do.

``release.patch`` is written by ``patch``, and it is a manifest key anyone can edit (a merge, a
hand-made patch). ``validate`` holds only its numbering. A patch whose ``fixes`` say
"accelerate 1.5.2 → 1.6.0, by: component" while the manifest still pins accelerate 1.5.2
validates, and its notes say both "Fixed CVE-2026-0001 in accelerate: 1.5.2 → 1.6.0" (Bug
Fixes) and "accelerate 1.5.2" (Contents): notes that say a fix the image does not have. A fix
``by: component`` whose component is not at ``new`` (or ``by: constraint`` with no such floor) is
a mistake ``validate`` can name."""

from __future__ import annotations

import pytest

from ..helpers import run
from ..release.published_kit import CPU, World


@pytest.mark.timeout(60)
def test_a_fix_the_manifest_does_not_make_is_named_by_validate(published: World) -> None:
    published.patch_manifest(CPU, "25.03.1", "25.03")  # changes no pin
    path = published.root / "manifests" / CPU / "25.03.1.yaml"
    claimed = (
        "    fixes:\n"
        "    - {id: CVE-2026-0001, package: accelerate, severity: medium, old: 1.5.2, new: 1.6.0,\n"
        "       by: component}\n"
    )
    path.write_text(path.read_text().replace("    fixes: []\n", claimed))

    result = run(published.root, "validate", f"{CPU}:25.03.1")

    # today: "1 manifest valid", and the notes say the fix
    assert result.exit_code == 2, result.output
    assert "accelerate" in result.output
