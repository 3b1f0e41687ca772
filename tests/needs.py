"""What the suite needs from the machine (a tool, a schema, the stack): one rule for when it is
not there. In CI (`CI=true`) that fails the run, it never skips; on a developer's machine
without it, the test is skipped and says what installs it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[1]
SARIF_SCHEMA = ROOT / ".cache" / "sarif" / "sarif-2.1.0.json"  # ci/test.sh fetches it (npm)


def missing(message: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"required in CI: {message}", pytrace=False)
    pytest.skip(message)


def sarif_schema() -> Path:
    """SARIF 2.1.0's own schema, as Microsoft's SARIF multitool ships it."""
    if not SARIF_SCHEMA.is_file():
        missing(f"the SARIF schema is not installed at {SARIF_SCHEMA}: ci/test.sh installs it")
    return SARIF_SCHEMA
