"""Outside text as it may be shown: one sanitizer for every id, tag, name or answer that came from
outside and is echoed to a person (a terminal, a CI log, release notes).

An advisory id with a newline in it would print as two lines, the second of the author's
choosing (a forged ``error:`` or ``passed`` line in a CI log); an escape sequence would move the
cursor, recolour or retitle the terminal; a right-to-left override would show text reversed.
``shown`` writes every such character as a visible escape (``\\n``, ``\\x1b``, ``\\u202e``) and
cuts the text to a length that names it without filling a screen; a secret it quotes (a server
that echoes our ``Authorization`` header) is hidden first, so no cut can leave half of one.
"""

from __future__ import annotations

import unicodedata

from ..secrets import redact
from .limits import MAX_SHOWN_CHARS

# Control characters (C0, DEL, C1), format characters (bidirectional overrides, zero-width
# joiners), line and paragraph separators, and surrogates and unassigned code points.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def _escaped(ch: str) -> str:
    if unicodedata.category(ch) not in _HIDDEN:
        return ch
    return repr(ch)[1:-1] if ch not in "'\"" else ch


def shown(text: object, limit: int = MAX_SHOWN_CHARS) -> str:
    """``text`` with every registered secret hidden (``secrets.redact``), and every character
    that could hide, move or forge output written as a visible escape, cut to ``limit``
    characters (saying how long it was)."""
    return _cut(redact(text if isinstance(text, str) else str(text)), limit)


def _cut(raw: str, limit: int) -> str:
    cut = raw if len(raw) <= limit else raw[:limit]
    out = "".join(_escaped(ch) for ch in cut)
    return out if cut is raw else f"{out}... ({len(raw)} characters)"


def shown_lines(text: str) -> str:
    """A message of ours, several lines, with whatever outside text it quotes escaped as ``shown``
    does: its own line breaks stay, every other hidden character (an escape sequence, a carriage
    return that would overwrite the line) is made visible, and a long secret is hidden (short
    ones only in the outside text it quotes: ``secrets``). Nothing is cut."""
    lines = [redact(line, outside=False) for line in text.split("\n")]
    return "\n".join(_cut(line, len(line)) for line in lines)
