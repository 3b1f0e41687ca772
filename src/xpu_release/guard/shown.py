"""Outside text as it may be shown: one sanitizer for every id, tag, name or answer that came from
outside and is echoed to a person (a terminal, a CI log, release notes).

An advisory id with a newline in it would print as two lines, the second of the author's
choosing (a forged ``error:`` or ``passed`` line in a CI log); an escape sequence would move the
cursor, recolour or retitle the terminal; a right-to-left override would show text reversed.
``shown`` writes every such character as a visible escape (``\\n``, ``\\x1b``, ``\\u202e``) and
cuts the text to a length that names it without filling a screen.
"""

from __future__ import annotations

import unicodedata

from .limits import MAX_SHOWN_CHARS

# Control characters (C0, DEL, C1), format characters (bidirectional overrides, zero-width
# joiners), line and paragraph separators, and surrogates and unassigned code points.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def _escaped(ch: str) -> str:
    if unicodedata.category(ch) not in _HIDDEN:
        return ch
    return repr(ch)[1:-1] if ch not in "'\"" else ch


def shown(text: object, limit: int = MAX_SHOWN_CHARS) -> str:
    """``text`` with every character that could hide, move or forge output written as a visible
    escape, cut to ``limit`` characters (saying how long it was)."""
    raw = text if isinstance(text, str) else str(text)
    cut = raw if len(raw) <= limit else raw[:limit]
    out = "".join(_escaped(ch) for ch in cut)
    return out if cut is raw else f"{out}... ({len(raw)} characters)"


def shown_lines(text: str) -> str:
    """A message of ours, several lines, with whatever outside text it quotes escaped as ``shown``
    does: its own line breaks stay, every other hidden character (an escape sequence, a carriage
    return that would overwrite the line) is made visible. Nothing is cut."""
    return "\n".join(shown(line, len(line)) for line in text.split("\n"))


# Not ``_``: inside a word (tokens_per_second) CommonMark makes no emphasis of it.
_MARKDOWN = str.maketrans({ch: f"\\{ch}" for ch in "\\|<>[]*`"})


def shown_cell(text: object, limit: int = MAX_SHOWN_CHARS) -> str:
    """Outside text in a Markdown table cell or line of generated Markdown (release notes): as
    ``shown``, on one line, and every character Markdown would read as structure escaped with a
    backslash (``|`` would split the cell and shift the columns after it; ``<``, ``[`` and ``*``
    would make a tag, a link or emphasis of a workload's words)."""
    return shown(" ".join(str(text).split()), limit).translate(_MARKDOWN)
