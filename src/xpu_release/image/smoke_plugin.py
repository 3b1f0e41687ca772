"""pytest plugin for smoke runs (``-p xpu_release.image.smoke_plugin --xpu-spec FILE``): the
``spec`` fixture and the parametrization of the generic checks, both read from the JSON
``smoke.py`` writes from the manifest, so a pin can never drift from what is tested."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SPEC_OPTION = "xpu_spec"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--xpu-spec", dest=SPEC_OPTION, help="The smoke checks' JSON, written by smoke.py.")


def _spec(config: pytest.Config) -> dict[str, Any]:
    path = config.getoption(SPEC_OPTION)
    return json.loads(Path(path).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def spec(request: pytest.FixtureRequest) -> dict[str, Any]:
    return _spec(request.config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    s = _spec(metafunc.config)
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
