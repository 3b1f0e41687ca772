"""Secrets are registered once, where they are read or received, and redacted from everything we
print that could carry one: outside text as it is shown (``guard.shown``, a registry's error
text, the engine's output) and every error message.

Registered with a secret are the forms it travels in, since a server that echoes a request
echoes those: a login registers its password and ``base64(user:password)`` (a Basic
``Authorization`` header, a docker config's ``auth``); a bearer token is registered by the
transport that receives it. Each is registered as it is, URL-encoded and JSON-escaped.

How a secret is found in text depends on its length. One of ``ANYWHERE`` characters or more is
replaced wherever it appears. A shorter one (a password of a few characters: a registry allows
it, we cannot refuse it) is replaced only where it stands alone, with no letter, digit or
underscore on either side, and only in outside text: replaced inside words, a password ``in`` would turn
"copying" into "copy***g" and every message into a riddle, and our own sentences never carry a
secret (none is ever formatted into one).
"""

from __future__ import annotations

import base64
import json
import re
import threading
from urllib.parse import quote

ANYWHERE = 8  # characters from which a secret is replaced wherever it appears
MASK = "***"

_SECRETS: set[str] = set()
_LOCK = threading.Lock()
# The long secrets, and the pattern of the short ones standing alone: made on first use after a
# change. Long ones are found as plain text: one pattern of every secret, compiled again at each
# new bearer token, was a second of CPU per few hundred tokens.
_FINDERS: list[tuple[tuple[str, ...], re.Pattern[str] | None]] = []


def _forms(value: str) -> set[str]:
    """``value`` as it is, and as it appears URL-encoded or inside a JSON string."""
    return {value, quote(value, safe=""), json.dumps(value)[1:-1], value.replace("/", "\\/")}


def register(value: str | None) -> str | None:
    """Remember ``value`` (and its URL-encoded and JSON-escaped forms) so that ``redact`` hides
    it; returns it unchanged."""
    if value:
        with _LOCK:
            new = _forms(value) - _SECRETS
            if new:
                _SECRETS.update(new)
                _FINDERS.clear()
    return value


def basic_credentials(username: str, password: str) -> str:
    """``base64(user:password)`` as docker sends and stores it (UTF-8), registered as a secret."""
    encoded = base64.b64encode(f"{username}:{password}".encode()).decode()
    register(encoded)
    return encoded


def _finders() -> tuple[tuple[str, ...], re.Pattern[str] | None]:
    with _LOCK:
        if not _FINDERS:
            # Longest first (where "ab" and "ab-c" both stand alone, the pattern takes "ab-c"),
            # then by text: one order whatever the hash seed.
            ordered = sorted(_SECRETS, key=lambda s: (-len(s), s))
            long = tuple(s for s in ordered if len(s) >= ANYWHERE)
            short = [rf"(?<!\w){re.escape(s)}(?!\w)" for s in ordered if len(s) < ANYWHERE]
            _FINDERS.append((long, re.compile("|".join(short)) if short else None))
        return _FINDERS[0]


def redact(text: str, *, outside: bool = True) -> str:
    """``text`` with every registered secret replaced by ``***``. ``outside``: the text came
    from outside (a registry, the engine), so a short secret standing alone is replaced too;
    our own messages are cleared of long ones only (see the module's docstring).

    Every character that any occurrence of a secret covers is hidden, whichever secrets overlap
    there and in whatever order they were registered; a run of them is one ``***``."""
    long, short = _finders()
    spans: list[tuple[int, int]] = []
    for secret in long:
        at = text.find(secret)
        while at != -1:
            spans.append((at, at + len(secret)))
            at = text.find(secret, at + 1)
    if outside and short is not None:
        spans += [m.span() for m in short.finditer(text)]
    if not spans:
        return text
    runs: list[list[int]] = []  # [start, end) of each run of hidden characters
    for start, end in sorted(spans):
        if runs and start <= runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], end)
        else:
            runs.append([start, end])
    pieces, shown = [], 0
    for start, end in runs:
        pieces += [text[shown:start], MASK]
        shown = end
    pieces.append(text[shown:])
    return "".join(pieces)


def forget_all() -> None:
    """Forget every secret: a process that runs several commands (the tests) starts each clean."""
    with _LOCK:
        _SECRETS.clear()
        _FINDERS.clear()
