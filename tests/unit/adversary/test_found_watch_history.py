"""Found by the adversary (#39): the re-scan history in a state ``watch`` did not write.

- **A history that cannot be written** (``<version>.watch`` is a file, a FIFO, a link loop: a
  stray copy, a sync tool): the whole run ends at that release in exit 13 with "cannot write
  the re-scan history (File exists)", and nothing else: the answers of the releases checked
  before and after it are lost (``--json`` prints nothing), though the docs say "The others are
  still checked when one cannot be", and the message does not say what to do (remove or rename
  the file).
- **An entry ``watch`` did not name**: ``latest`` orders every ``*.json`` by its name as text, so
  a file not named by a UTC time (``notes.json``, ``latest.json``, a copy) sorts after every
  real entry and is taken as the latest for ever: ``status`` and ``list`` show its answer
  (even a state that is none of watch's, "security: x") while the newest real re-scan says
  the release needs a patch, and its ``first_seen`` days feed the SLA.
- **An entry that is not a regular file**: the history is read with a plain ``read_text``, not
  through the guarded layer every other outside file goes through. A FIFO named like the
  newest entry hangs ``status``, ``list`` and ``watch`` for ever; a link to ``/dev/zero`` reads
  until memory runs out (18 GB in 20 s, seen by hand: not reproduced here, for the machine's
  sake); a 300 MB entry is read whole. A release record in the same state is exit 12, named."""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Any

import pytest

from ..helpers import run
from ..release.published_kit import CPU, SDK, World


@pytest.mark.timeout(60)
def test_a_history_that_cannot_be_written_does_not_lose_the_other_releases_answers(published: World) -> None:
    published.advisory("CVE-2026-0001", "accelerate", "1.6.0")
    where = published.root / "out" / "releases" / CPU / "25.03.watch"
    where.parent.mkdir(parents=True)
    where.write_text("a stray file where the history folder goes\n")

    result = run(published.root, "--registries", str(published.registries), "watch", "--advisories",
                 str(published.osv), "--today", "2026-12-03", "--json")  # fmt: skip

    assert "Traceback" not in result.output
    assert result.exit_code != 0
    # today: exit 13 and an empty stdout: the SDK's answer (and training's) are lost
    found = {r["ref"]: r for r in json.loads(result.stdout)["releases"]}
    assert found[f"{SDK}:2.13.0"]["state"] == "up to date"
    assert found[f"{CPU}:25.03"]["state"] == "needs a patch"


@pytest.mark.timeout(60)
def test_a_history_that_cannot_be_written_says_what_to_do(published: World) -> None:
    where = published.root / "out" / "releases" / CPU / "25.03.watch"
    where.parent.mkdir(parents=True)
    where.write_text("a stray file\n")

    result = run(published.root, "--registries", str(published.registries), "watch", f"{CPU}:25.03",
                 "--advisories", str(published.osv))  # fmt: skip

    assert result.exit_code != 70
    # today: "...25.03.watch: cannot write the re-scan history (File exists)": it does exist, as a
    # file; what is wrong (not a folder) and what to do (move it away) are not said
    assert "File exists" not in result.stderr, result.stderr
    assert re.search(r"\b(remove|rename|move)\b", result.stderr), result.stderr


@pytest.mark.timeout(60)
def test_a_file_watch_did_not_name_never_shadows_the_newest_rescan(published: World) -> None:
    folder = published.root / "out" / "releases" / CPU / "25.03.watch"
    folder.mkdir(parents=True)
    finding = {"id": "CVE-2026-0001", "package": "accelerate", "first_seen": "2026-11-30"}
    stray = {"ref": f"{CPU}:25.03", "state": "up to date", "open": {}, "checked_at": "2026-01-01T00:00:00Z",
             "findings": [finding]}  # fmt: skip
    (folder / "notes.json").write_text(json.dumps(stray))
    published.advisory("CVE-2026-0001", "accelerate", "1.6.0", published=None)

    assert run(published.root, "--registries", str(published.registries), "watch", f"{CPU}:25.03",
               "--advisories", str(published.osv), "--today", "2026-12-03").exit_code == 15  # fmt: skip
    status = run(published.root, "--registries", str(published.registries), "status", f"{CPU}:25.03")
    listed = run(published.root, "list")

    said = [ln for ln in status.stdout.splitlines() if ln.startswith("security:")]
    # today: "security: up to date (watched 2026-01-01T00:00:00Z)", from notes.json
    assert said, status.stdout
    assert said[0].startswith("security: needs a patch"), said
    assert "needs a patch" in next(ln for ln in listed.stdout.splitlines() if ln.startswith(f"{CPU}:25.03"))


@pytest.mark.timeout(60)
def test_an_entry_whose_state_is_none_of_watchs_is_not_shown_as_the_security_state(published: World) -> None:
    folder = published.root / "out" / "releases" / CPU / "25.03.watch"
    folder.mkdir(parents=True)
    (folder / "20261203T000000.000000Z.json").write_text(
        json.dumps({"ref": f"{CPU}:25.03", "state": "all good!"})
    )

    status = run(published.root, "--registries", str(published.registries), "status", f"{CPU}:25.03")

    assert status.exit_code in (0, 12)
    # today: "security: all good! (watched at an unknown time)"
    assert "all good!" not in status.stdout


@pytest.mark.timeout(60)
def test_a_fifo_named_like_the_newest_entry_does_not_hang_status(published: World) -> None:
    folder = published.root / "out" / "releases" / CPU / "25.03.watch"
    folder.mkdir(parents=True)
    fifo = folder / "20261203T000000.000000Z.json"
    os.mkfifo(fifo)
    said: list[Any] = []
    asking = threading.Thread(
        target=lambda: said.append(run(published.root, "--registries", str(published.registries), "status",
                                       f"{CPU}:25.03")),
        daemon=True,
    )  # fmt: skip

    asking.start()
    asking.join(timeout=10)
    hung = asking.is_alive()
    if hung:  # give the reader an end, so the thread finishes
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        asking.join(timeout=10)

    # today: status blocks in open() on the FIFO, for ever
    assert not hung, "status hangs on a FIFO in the re-scan history"
    assert said[0].exit_code in (0, 12)
