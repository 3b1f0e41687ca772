"""A support date removed from a manifest stays at the registries, silently. The lifecycle
document ("the .NET layout ... so tools can tell without a website") of a date that was set,
here one already past, keeps saying *end of life since 2020-06-30* at every endpoint after the
date is taken out of the manifest and ``publish`` is rerun (exit 0, nothing said), while
``list`` and ``status`` say "no support date" and ``status`` shows the document as an ordinary
``life`` attachment. Removing a date is a change of the date: the rerun must either make the
registries stop stating it or say that they still do (and how to fix it)."""

from __future__ import annotations

import json

from ..release.fake_release import REF, World
from ..release.test_lifecycle_publish import MANIFEST, at_every_endpoint, cli, set_support

PAST = "2020-06-30"


def test_a_removed_support_date_is_not_left_stated_at_the_registries_without_a_word(released: World) -> None:
    w = released
    set_support(w, PAST)  # a date set by mistake: every tool now says end of life
    code, out, err = cli(w, "publish", REF, "--json")
    assert code == 0, err
    digest = json.loads(out)["digest"]
    path = w.root / MANIFEST
    path.write_text(path.read_text().split("\nsupport:", 1)[0].rstrip("\n") + "\n")  # taken out

    code, _, err = cli(w, "publish", REF, "--json")
    stated = {d.get("lifecycle") for d in at_every_endpoint(w, digest).values()}
    status = json.loads(cli(w, "status", REF, "--json")[1])

    assert code == 0, err
    assert status["support"]["state"] == "unknown"  # what xpu-release says now
    assert stated != {f"{PAST}T00:00:00Z"} or "lifecycle" in err, (
        "every registry still states end of life since 2020-06-30, and the rerun said nothing"
    )
