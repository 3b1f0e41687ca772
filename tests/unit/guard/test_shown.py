"""What counts as saying nothing: a reason a reviewer cannot see (blanks of any width, zero-width
and direction marks, characters fonts draw blank) is no reason, whatever ``str.strip`` leaves."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpu_release.guard.shown import says_nothing

DRAWN_BLANK = "\u2800\u3164\u115f\u1160\uffa0\u180e"  # letters and symbols fonts draw blank
UNSEEN = DRAWN_BLANK + "\u200b\u200c\u200d\u2060\ufeff\u200e\u202e\u3000\u00a0 \t\n\x00\u0301"


@pytest.mark.parametrize(
    ("text", "nothing"),
    [
        ("", True),
        ("  \t\n", True),
        ("\u200b", True),  # zero-width space: str.strip keeps it
        ("\u2800\u3000", True),  # Braille blank, ideographic space
        ("\u200b\u200c\ufeff", True),
        ("\u3164", True),  # Hangul filler: a letter drawn blank
        ("\u0301", True),  # a combining accent with nothing under it
        ("x", False),
        ("\u200bfixed upstream\u200b", False),
        ("中文", False),
        ("é", False),
        (".", False),
    ],
)
def test_says_nothing(text: str, nothing: bool) -> None:
    assert says_nothing(text) is nothing


@settings(deadline=1000)
@given(st.text(alphabet=UNSEEN), st.text(alphabet=st.characters(categories=["L", "N", "P"]), min_size=1),
       st.text(alphabet=UNSEEN))  # fmt: skip
def test_invisible_padding_neither_makes_nor_hides_a_reason(before: str, seen: str, after: str) -> None:
    assert says_nothing(before + after)
    assert not says_nothing(before + seen + after) or set(seen) <= set(DRAWN_BLANK)
