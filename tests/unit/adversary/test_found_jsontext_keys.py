"""``jsontext.readable`` writes what ``json.dumps`` writes, and refuses what it refuses. A key
that is not text is named as ``json.dumps`` names it, and only the keys it takes (str, int,
float, bool, None): ``json.dumps({(1, 2): 3})`` is a TypeError (a bug of ours, said as one),
``readable`` wrote ``{"[1, 2]": 3}``, a key nobody made, silently. Above ``DEPTH`` levels the C
encoder refuses it (nested keys were checked), so the same value passed or failed by its depth."""

from __future__ import annotations

import json
from typing import Any

import pytest

from xpu_release.jsontext import readable


@pytest.mark.parametrize(
    "key", [(1, 2), frozenset({1}), b"k", object()], ids=["tuple", "frozenset", "bytes", "object"]
)
@pytest.mark.parametrize("nested", [0, 5], ids=["top", "deep"])
def test_a_key_json_dumps_refuses_is_refused(key: Any, nested: int) -> None:
    value: Any = {key: 3}
    for _ in range(nested):
        value = [value]
    with pytest.raises(TypeError):
        json.dumps(value)

    with pytest.raises(TypeError):  # today: '{"[1, 2]": 3}' at the top, TypeError deep
        readable(value)
