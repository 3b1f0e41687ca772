"""Generated smoke checks, run by `xpu-release test` inside a container of the built image.

Their parameters come from the manifest through the plugin `xpu_release.image.smoke_plugin`
(`--xpu-spec FILE`); outside such a run (a plain `pytest`) these files are not collected."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name.startswith("test_") and not config.getoption("xpu_spec", default=None):
        return True
    return None
