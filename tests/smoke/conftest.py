"""Generated smoke checks, run by `xpu-release test` inside a container of the built image.

Their parameters come from the manifest through the plugin `xpu_release.smoke_plugin`;
outside such a run (a plain `pytest`) these files are not collected."""

from __future__ import annotations

import os

SPEC_ENV = "XPU_RELEASE_SMOKE_SPEC"

if not os.environ.get(SPEC_ENV):
    collect_ignore_glob = ["test_*.py"]
