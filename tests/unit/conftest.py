"""Unit tests see only the repository's own registries file, whatever the shell exported."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_stack_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "XPU_RELEASE_REGISTRIES",
        "XPU_RELEASE_ROOT",
        "XPU_RELEASE_USERNAME",
        "XPU_RELEASE_PASSWORD",
    ):
        monkeypatch.delenv(name, raising=False)
