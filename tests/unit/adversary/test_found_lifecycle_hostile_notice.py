"""A withdrawal notice is read back from the registries, where "anyone who can push to the
repository can attach one" (docs/using/lifecycle.md, Limits). Its text is untrusted input, yet
``status`` and ``verify`` printed its ``reason`` and ``by`` as they came: a terminal escape (OSC:
it retitles the terminal, and on a terminal click strips nothing), line breaks that forge lines
of their own ("## Injected heading", or a fake "verified" line), and 5000 characters where
``--reason`` allows 500. A rerun of ``withdraw`` copied it into the release record, and the next
release's notes (Markdown, published) carried the forged heading.

What the commands print of a notice must be one line, free of control characters, bounded as
``--reason`` is; the notes likewise."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from xpu_release.evidence.lifecycle import MAX_REASON, make_notice
from xpu_release.evidence.referrers import attach

from ..helpers import run
from ..release.line import Channel, channel, image_of, manifests, publish, recorded
from .lifecycle_kit import at

HOSTILE_BY = "ci\x1b]0;pwned\x07"
HOSTILE_REASON = "bad\n## Injected heading\ndemo:1.1: verified everywhere\u202e" + "A" * 5000


def hostile_withdrawal(ch: Channel, version: str, spool: Path) -> None:
    """A withdrawal notice somebody with push rights attached at every endpoint."""
    _, image = image_of(version)
    notice = make_notice("withdrawal", ref=f"demo:{version}", subject=image.digest,
                         at="2026-01-01T00:00:00Z", by=HOSTILE_BY, reason=HOSTILE_REASON)  # fmt: skip
    for ep in ch.endpoints():
        attach(ch.client(ep), ch.repo(ep), image, [notice.attachment], created="", spool=spool)


def said_of_the_withdrawal(text: str) -> list[str]:
    return [line for line in text.splitlines() if "pwned" in line or "bad" in line or "Injected" in line]


def clean(line: str) -> bool:
    return not any(unicodedata.category(c) in ("Cc", "Cf") for c in line)


def test_status_and_verify_say_a_hostile_notice_on_one_clean_bounded_line(repo: Path, tmp_path: Path) -> None:
    manifests(repo, ["1.0", "1.1"])
    with channel(repo, tmp_path, "production") as ch:
        publish(ch, ["1.0", "1.1"], tmp_path / "spool")
        hostile_withdrawal(ch, "1.1", tmp_path / "spool")

        status = at(ch, "status", "demo:1.1")
        verify = at(ch, "verify", "demo:1.1")

    for result in (status, verify):
        assert result.exit_code == 0, result.stderr
        lines = said_of_the_withdrawal(result.stdout)
        assert len(lines) == 1, lines  # one line: the notice cannot forge lines of its own
        assert clean(lines[0]), repr(lines[0][:80])
        assert len(lines[0]) < MAX_REASON + 200


def test_the_next_notes_carry_no_markdown_forged_by_a_notice(repo: Path, tmp_path: Path) -> None:
    manifests(repo, ["1.0", "1.1"])
    with channel(repo, tmp_path, "production") as ch:
        digests = publish(ch, ["1.0", "1.1"], tmp_path / "spool").digests
        recorded(ch, "1.1", digests["1.1"])
        hostile_withdrawal(ch, "1.1", tmp_path / "spool")
        rerun = at(ch, "withdraw", "demo:1.1", "--reason", "ours")
        manifests(repo, ["1.2"])
        notes = run(repo, "--registries", str(ch.file), "notes", "demo:1.2", "--lang", "en")

    assert rerun.exit_code == 0, rerun.stderr
    assert notes.exit_code == 0, notes.stderr
    assert "1.1 was withdrawn on" in notes.stdout
    assert "\n## Injected heading" not in notes.stdout
    assert all(clean(line) for line in notes.stdout.splitlines())
