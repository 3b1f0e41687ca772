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

import os
import unicodedata

from ..secrets import redact
from .limits import MAX_SHOWN_CHARS

# Control characters (C0, DEL, C1), format characters (bidirectional overrides, zero-width
# joiners), line and paragraph separators, and surrogates and unassigned code points.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})

# What a reader sees nothing of besides those: spaces of every width (Zs), combining marks with
# nothing to combine with (Mn, Me), and the letters and symbols fonts draw blank (the Braille
# pattern blank, the Hangul fillers, the Mongolian vowel separator), none of which ``str.strip``
# removes.
_UNSEEN = _HIDDEN | {"Zs", "Mn", "Me"}
_DRAWN_BLANK = frozenset("\u2800\u3164\u115f\u1160\uffa0\u180e")


def _escaped(ch: str) -> str:
    if unicodedata.category(ch) not in _HIDDEN:
        return ch
    return repr(ch)[1:-1] if ch not in "'\"" else ch


def shown(text: object, limit: int = MAX_SHOWN_CHARS) -> str:
    """``text`` with every registered secret hidden (``secrets.redact``), and every character
    that could hide, move or forge output written as a visible escape, cut to ``limit``
    characters (saying how long it was). The escapes count too: text made of control characters
    shows at most ``limit`` characters and the few more that say it was cut."""
    raw = redact(text if isinstance(text, str) else str(text))
    out = _cut(raw, limit)
    return out if len(out) <= limit + 40 else f"{out[:limit]}... ({len(raw)} characters)"


def quoted(text: str, limit: int = 80) -> str:
    """A name the user typed, as an error quotes it: ``shown``, between quotes."""
    return f"'{shown(text, limit)}'"


def _cut(raw: str, limit: int) -> str:
    cut = raw if len(raw) <= limit else raw[:limit]
    # Printable text (most of it) has none of the hidden characters: str.isprintable is false for
    # every category in _HIDDEN, and for the spaces _escaped keeps as they are (the slow way).
    out = cut if cut.isprintable() else "".join(_escaped(ch) for ch in cut)
    return out if cut is raw else f"{out}... ({len(raw)} characters)"


def says_nothing(text: str) -> bool:
    """``text`` shows a reader nothing: it is empty, or every character of it is a blank, an
    invisible one (zero-width, a direction mark, a control) or one drawn blank. A reason, a name
    or a statement made of them reads as missing in a review, so it counts as missing."""
    return all(ch.isspace() or ch in _DRAWN_BLANK or unicodedata.category(ch) in _UNSEEN for ch in text)


def shown_lines(text: str, limit: int | None = None) -> str:
    """A message of ours, several lines, with whatever outside text it quotes escaped as ``shown``
    does: its own line breaks stay, every other hidden character (an escape sequence, a carriage
    return that would overwrite the line) is made visible, and a long secret is hidden (short
    ones only in the outside text it quotes: ``secrets``). A line longer than ``limit`` is cut in
    its middle: what failed (its start) and what to do (its end) both stay."""
    lines = [redact(line, outside=False) for line in text.split("\n")]
    return "\n".join(_middle(_cut(line, len(line)), limit) for line in lines)


def _middle(line: str, limit: int | None) -> str:
    if limit is None or len(line) <= limit:
        return line
    head, tail = (limit * 2) // 3, max(limit // 3 - 20, 0)
    return f"{line[:head]} … ({len(line) - head - tail} characters) … {line[len(line) - tail :]}"


def path_text(path: object) -> str:
    """A file's name as text that is valid UTF-8 whatever its bytes (a name is any bytes but
    ``/`` and NUL): a byte that is not UTF-8 is written ``\\xNN``, so a JSON document or a log
    that quotes it stays valid; nothing else is changed (JSON escapes the rest)."""
    raw = os.fsencode(str(path))
    return raw.decode("utf-8", "backslashreplace")


# Not ``_``: inside a word (tokens_per_second) CommonMark makes no emphasis of it.
_MARKDOWN = str.maketrans({ch: f"\\{ch}" for ch in "\\|<>[]*`"})


def shown_cell(text: object, limit: int = MAX_SHOWN_CHARS) -> str:
    """Outside text in a Markdown table cell or line of generated Markdown (release notes): as
    ``shown``, on one line, and every character Markdown would read as structure escaped with a
    backslash (``|`` would split the cell and shift the columns after it; ``<``, ``[`` and ``*``
    would make a tag, a link or emphasis of a workload's words)."""
    return shown(" ".join(str(text).split()), limit).translate(_MARKDOWN)
