"""Unit tests see only the repository's own registries file, whatever the shell exported."""

from __future__ import annotations

import pytest

STACK_ENVIRONMENT = (
    "XPU_RELEASE_REGISTRIES",
    "XPU_RELEASE_ROOT",
    "XPU_RELEASE_USERNAME",
    "XPU_RELEASE_PASSWORD",
)


def forget_the_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in STACK_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _no_stack_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    forget_the_stack(monkeypatch)
