"""Secrets never reach what we print: a password, the forms it travels in (base64 of
``user:password``, as a Basic header and a docker config carry it; URL-encoded; JSON-escaped)
and a bearer token, wherever outside text quotes them. A short password (a registry may allow
one) is hidden where it stands alone in outside text, never inside a word, and never blanks out
our own sentences (docs/using/registries.md)."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xpu_release.guard.shown import shown, shown_lines
from xpu_release.oci.credentials import Credentials
from xpu_release.secrets import ANYWHERE, forget_all, redact, register

# No "*": the mask itself could otherwise make a new occurrence next to one it replaced.
_SECRET_CHARS = st.characters(blacklist_characters="*", blacklist_categories=("Cs",))


@given(secret=st.text(_SECRET_CHARS, min_size=ANYWHERE, max_size=40), before=st.text(max_size=30),
       after=st.text(max_size=30))  # fmt: skip
def test_a_long_secret_is_hidden_wherever_it_appears(secret: str, before: str, after: str) -> None:
    forget_all()  # each example its own secret
    register(secret)

    assert secret not in redact(f"{before}{secret}{after}{secret}")
    assert secret not in redact(f"{before}{secret}{after}", outside=False)


def test_a_login_registers_every_form_it_travels_in() -> None:
    login = Credentials(username="ci", password="pa/ss+wörd")  # made: registered
    basic = base64.b64encode(b"ci:pa/ss+w\xc3\xb6rd").decode()
    echoed = [login.password, basic, f"Basic {basic}", quote(login.password, safe=""),
              json.dumps(login.password)[1:-1], login.password.replace("/", "\\/")]  # fmt: skip

    for form in echoed:
        assert redact(f"you sent Authorization: {form}.") in (
            "you sent Authorization: ***.",
            "you sent Authorization: Basic ***.",
        ), form
    assert login.basic == f"Basic {basic}"  # UTF-8, as docker sends it (requests' latin-1 raised)


@given(st.text(st.characters(whitelist_categories=("Ll", "Lu", "Nd")), min_size=1, max_size=ANYWHERE - 1))
def test_a_short_secret_is_hidden_where_it_stands_alone_in_outside_text(secret: str) -> None:
    forget_all()
    register(secret)

    assert redact(f"password {secret}: denied") == "password ***: denied"
    assert redact(f"'{secret}'") == "'***'"
    assert redact(f"x{secret}x") == f"x{secret}x"  # inside a word: the word stays
    assert redact(f"copy {secret} now", outside=False) == f"copy {secret} now"  # our own sentence


def test_our_message_is_cleared_of_long_secrets_and_outside_text_of_short_ones() -> None:
    register("in")
    register("s3cr3t-token-value")

    ours = shown_lines("copying in 3 s; the server said: s3cr3t-token-value")
    theirs = shown("denied: in, s3cr3t-token-value")

    assert ours == "copying in 3 s; the server said: ***"
    assert theirs == "denied: ***, ***"


def test_a_secret_is_hidden_before_outside_text_is_cut() -> None:
    register("TOKEN-0123456789abcdef")

    cut = shown("x" * 10 + "TOKEN-0123456789abcdef", 20)  # a cut after "TOKEN-01" would leak it

    assert "TOKEN-0" not in cut
    assert cut.startswith("x" * 10 + "***")


@given(st.lists(st.text("abcdefgh0123456789-_", min_size=ANYWHERE, max_size=30), min_size=2, max_size=12,
                unique=True))  # fmt: skip
def test_every_long_secret_of_many_is_hidden_wherever_it_appears(secrets: list[str]) -> None:
    # Some are inside others (the longer is hidden whole); none spans the separator.
    forget_all()
    for secret in secrets:
        register(secret)  # one by one, as a transport receives its tokens
        redact("a message between two tokens")

    shown_text = redact(" | ".join(["", *secrets, ""]))

    assert [s for s in secrets if s in shown_text] == []
    assert shown_text == " | ".join(["", *["***"] * len(secrets), ""])


# Where secrets meet in a text: each row registers its secrets, then shows a text (``outside``:
# from outside, where short ones count too). The adversary's rows: the longest replaced first once
# left 8 characters of an overlapping one, which of two equal-length ones was hidden followed the
# hash seed, and a short "*" was found again inside the mask a long one left.
MEETINGS = {
    "a secret inside a longer one leaves nothing of the longer": (
        ("token-0123456789", "prefix-token-0123456789-suffix"),
        [("said: prefix-token-0123456789-suffix.", True, "said: ***."),
         ("said: token-0123456789.", True, "said: ***.")]),
    "secrets that overlap are hidden whole whatever their order": (
        ("oooo-rrrrrrrrrr", "pppppppp-oooo", "rrrrrrrrrr", "aaaaXXXX", "XXXXbbbb"),
        [("got pppppppp-oooo-rrrrrrrrrr and aaaaXXXXbbbb", True, "got *** and ***"),
         ("got pppppppp-oooo-rrrrrrrrrr", False, "got ***")]),
    "a short secret is found in the text as it came, never in a mask": (
        ("*", "token-0123456789"),
        [("auth token-0123456789 failed", True, "auth *** failed"),
         ("auth * failed", True, "auth *** failed")]),
    "of two short secrets standing alone the longer is hidden whole": (
        ("ab", "ab-c"),
        [("said ab-c and ab", True, "said *** and ***")]),
}  # fmt: skip


@pytest.mark.parametrize(("secrets", "shown_as"), MEETINGS.values(), ids=MEETINGS.keys())
def test_where_secrets_meet_every_character_they_cover_is_hidden(
    secrets: tuple[str, ...], shown_as: list[tuple[str, bool, str]]
) -> None:
    for secret in secrets:
        register(secret)

    assert [redact(text, outside=outside) for text, outside, _ in shown_as] == [s for _, _, s in shown_as]
