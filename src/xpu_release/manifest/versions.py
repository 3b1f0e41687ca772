"""The order of an image's versions: which release is newer (``latest`` and a line's tag never
move backwards), which patches a line has, which one supersedes another.

A version starts with its **core**, dotted numbers (``25.03``, ``2.13.0``, ``2.13.0.1``), compared
number by number as numbers (``25.03 < 25.10``; ``25.03 < 25.03.1 < 25.04``: a patch, the core
and one more number, sorts after what it patches and before the next regular version). What
follows the core decides the rest:

- nothing: the release of that core;
- a hyphen after a **SemVer core** (exactly three numbers: ``2.14.0-rc.1``) starts a
  pre-release, which sorts *before* its release, as SemVer says: its dot-separated identifiers
  compare one by one, numbers as numbers and before words, words as text, fewer before more
  (``2.14.0-rc.1 < 2.14.0-rc.1.1 < 2.14.0-rc.2 < 2.14.0``). So the patches of a pre-release
  (``2.14.0-rc.1.1``, ``.2``, … ``.10``) sort after it, in numeric order, and before its next
  pre-release and its release;
- anything else (``25.03-py3``, a variant as NGC names them; ``1.0_x``) names a variant of
  that core, which sorts *after* its release and before the next core: pieces of digits compare
  as numbers, other pieces as text (``25.03 < 25.03-py3 < 25.03-py3.9 < 25.03-py3.10 < 25.04``).

A version with no core (``latest-cpu``) sorts after every numbered one, by the same pieces.
Numbers compare by their digits (length, then text), never through ``int()``: a version of
5,000 digits is a user's mistake to report, not Python's int limit to trip over. Two versions
that compare equal (``25.03`` and ``25.3``) are ordered by their text, so the order is total.
"""

from __future__ import annotations

import re

Piece = tuple[int, int, str]  # (0, digits, number) for a number, (1, 0, text) for text
Key = tuple[int, tuple[Piece, ...], int, tuple[Piece, ...], str]

_CORE = re.compile(r"[0-9]+(?:\.[0-9]+)*")
_PIECES = re.compile(r"[0-9]+|[^0-9]+")
PRE_RELEASE, RELEASE, VARIANT = 0, 1, 2


def _number(digits: str) -> Piece:
    n = digits.lstrip("0")
    return (0, len(n), n)


def _piece(text: str) -> Piece:
    return _number(text) if text.isascii() and text.isdigit() else (1, 0, text)


def _pieces(text: str) -> tuple[Piece, ...]:
    """Runs of digits as numbers, the text between them as text (``-py3.10``: ``-py``, 3, ``.``, 10)."""
    return tuple(_piece(p) for p in _PIECES.findall(text))


def version_key(v: str) -> Key:
    """Sort key for the versions of an image (see the module's docstring for the rule)."""
    core = _CORE.match(v)
    if core is None:
        return (1, (), VARIANT, _pieces(v), v)
    numbers = tuple(_number(p) for p in core[0].split("."))
    rest = v[core.end() :]
    if not rest:
        return (0, numbers, RELEASE, (), v)
    if rest.startswith("-") and len(numbers) == 3:
        return (0, numbers, PRE_RELEASE, tuple(_piece(i) for i in rest[1:].split(".")), v)
    return (0, numbers, VARIANT, _pieces(rest), v)
