"""pytest plugin for smoke runs (``-p xpu_release.smoke_plugin``): the ``spec`` fixture and the
parametrization of the generic checks, both read from the JSON ``smoke.py`` writes from the
manifest, so a pin can never drift from what is tested."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SPEC_ENV = "XPU_RELEASE_SMOKE_SPEC"


def _spec() -> dict[str, Any]:
    return json.loads(Path(os.environ[SPEC_ENV]).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def spec() -> dict[str, Any]:
    return _spec()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    s = _spec()
    table: dict[str, tuple[list[Any], Callable[[Any], str]]] = {
        "pin": (s["pip"], lambda p: p["package"]),
        "module": ([p["import"] for p in s["pip"]], str),
        "env_var": (sorted(s["env"].items()), lambda e: e[0]),
        "path": (s["files"], str),
        "tool": (s["tools"], str),
        "artifact": (s["artifacts"], lambda a: a["id"]),
        "label": (sorted(s["labels"].items()), lambda kv: kv[0]),
        "provided": (s.get("provided", []), lambda d: d["name"]),
        "sacred": (s.get("sacred", []), lambda d: d["name"]),
    }
    for name, (values, ident) in table.items():
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, values, ids=[ident(v) for v in values])
