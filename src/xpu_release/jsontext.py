"""JSON for people and scripts alike: indented like ``json.dumps(indent=2)``, except that a
list or object that fits on one line stays on one line (a reason, a digest map), one nested
deeper than ``DEPTH`` levels is one line however long (a finding of a release in ``watch
--json``: one a line), and every line is encoded by the standard library's C encoder.
``json.dumps`` with ``indent`` runs its pure-Python encoder: ``watch --json`` over 240 releases
spent a third of its time there."""

from __future__ import annotations

import json
from typing import Any

WIDTH = 100  # a container whose one-line form (indented) fits in this many characters stays whole
DEPTH = 3  # a container this deep (the top is 0) is one line


def readable(data: Any, *, ensure_ascii: bool = False, depth: int = DEPTH) -> str:
    """``data`` as indented JSON text (no trailing newline), containers ``depth`` levels deep on
    one line; ``json.loads`` gives ``data`` back. Each value is encoded once: a container is
    one line when its members are and they fit, decided from the members' text (bottom up)."""
    encode = json.JSONEncoder(ensure_ascii=ensure_ascii, separators=(", ", ": ")).encode

    def write(value: Any, level: int) -> tuple[str, bool]:
        """The text of ``value`` at ``level``, and whether it is one line."""
        if level >= depth or not isinstance(value, dict | list | tuple) or not value:
            return encode(value), True
        if isinstance(value, dict):  # a key that is not text is named as json.dumps names it
            keys = [encode(k if isinstance(k, str) else _key(k)) + ": " for k in value]
            members = [write(v, level + 1) for v in value.values()]
            texts = [k + text for k, (text, _) in zip(keys, members, strict=True)]
            opening, closing = "{", "}"
        else:
            members = [write(v, level + 1) for v in value]
            texts = [text for text, _ in members]
            opening, closing = "[", "]"
        if all(flat for _, flat in members) and sum(map(len, texts)) + 2 * len(texts) + level * 2 <= WIDTH:
            return opening + ", ".join(texts) + closing, True
        inner = "  " * (level + 1)
        return f"{opening}\n{inner}" + f",\n{inner}".join(texts) + f"\n{'  ' * level}{closing}", False

    return write(data, 0)[0]


def _key(key: Any) -> str:
    """A key that is not text as ``json.dumps`` names it; one it refuses (a tuple) is refused."""
    if key is not None and not isinstance(key, int | float):  # a bool is an int
        msg = f"keys must be str, int, float, bool or None, not {type(key).__name__}"
        raise TypeError(msg)
    return json.dumps(key)
