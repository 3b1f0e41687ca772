"""A number in outside text is read in ASCII digits only. ``str.isdigit`` is true of digits
``int`` refuses (``²``: an exit 70 once, from a Content-Length and a codec level), and ``int``
reads digits no one types in a size (``٣``, ``1_0``): every reader of a number in outside text
(a header, an option, a setting) gives its own documented error for them, never a ValueError."""

from __future__ import annotations

import re
from collections.abc import Callable
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xpu_release.errors import ConfigError, WireError
from xpu_release.guard.bodies import declared_length
from xpu_release.guard.reading import ascii_int
from xpu_release.oci.codec import parse_codec
from xpu_release.oci.transport import RetryPolicy
from xpu_release.release.run.cache import parse_age, parse_size

# Digits of every kind (decimal digits of other scripts, superscripts, fractions, numerals),
# mixed with ASCII ones, signs, underscores and spaces, which int() also takes.
_NUMBERISH = st.text(st.characters(categories=("Nd", "No", "Nl")) | st.sampled_from("0123456789_ +-"),
                     min_size=1, max_size=6)  # fmt: skip


@given(_NUMBERISH)
def test_only_ascii_digits_make_a_number(text: str) -> None:
    expected = int(text) if re.fullmatch(r"[0-9]{1,19}", text) else None

    assert ascii_int(text) == expected


def _length(text: str) -> object:
    return declared_length(SimpleNamespace(headers={"Content-Length": text}), "the answer")


READERS: list[tuple[str, Callable[[str], object], type[Exception]]] = [
    ("a Content-Length", _length, WireError),
    ("a codec level", lambda t: parse_codec(f"zlib:{t}", accept_zstd=False, where="-c"), ConfigError),
    ("a size", lambda t: parse_size(t, what="--keep-storage"), ConfigError),
    ("an age", lambda t: parse_age(f"{t}d", what="--older-than"), ConfigError),
]


@given(st.one_of(_NUMBERISH, st.sampled_from(["nan", "-1", "inf", "1e400", "Wed, 21 Oct 2015 07:28:00 GMT"])))
def test_a_retry_after_that_is_no_number_of_seconds_is_not_waited_for(text: str) -> None:
    policy = RetryPolicy(base_delay=0.2, max_delay=5.0)
    expected = min(int(text), 20) if re.fullmatch(r"[0-9]{1,6}", text.strip()) else None

    delay = policy.delay(2, text)  # a negative or nan would be time.sleep's ValueError: exit 70

    assert 0 <= delay <= 20
    assert expected is None or delay == expected


@pytest.mark.parametrize(("what", "read", "error"), READERS, ids=[r[0] for r in READERS])
@given(text=_NUMBERISH.filter(lambda t: not re.fullmatch(r"[0-9]+", t.strip())))
def test_a_number_in_other_digits_is_the_readers_own_error(
    what: str, read: Callable[[str], object], error: type[Exception], text: str
) -> None:
    with pytest.raises(error):
        read(text)
