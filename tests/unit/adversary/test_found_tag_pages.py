"""A tag list that pages for ever. ``RegistryClient.tags`` follows ``Link: <…>; rel="next"``
while the next URL is new, and counts tags against MAX_TAGS; pages are not bounded. A registry
whose every page is empty and names a new next page keeps ``status --catalog`` asking for ever
(one that sends one tag a page, for 100,000 pages). outside-data.md: "Tags of one repository:
100,000"; never a hang."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from .evil_registry import Handler, evil_registry
from .proc import a_users_error_of, run_cli


def test_a_tag_list_that_pages_for_ever_ends(repo: Path, tmp_path: Path) -> None:
    pages = itertools.count()

    def answer(h: Handler) -> None:
        if "/tags/list" not in h.path:
            h.send(404)
            return
        n = next(pages)
        link = f'</v2/ns/training-cpu-pytorch/tags/list?n=1000&last=page{n}>; rel="next"'
        h.send(200, json.dumps({"tags": []}).encode(), {"Content-Type": "application/json", "Link": link})

    registries = tmp_path / "registries.yaml"
    with evil_registry(answer) as (host, _):
        registries.write_text(
            "registries:\n"
            f"  public: {{host: '{host}', namespace: ns, insecure: true}}\n"
            f"  hub: {{host: '{host}', insecure: true}}\n"
            f"  vpc: {{hosts: {{cn-beijing: '{host}', cn-wulanchabu: '{host}'}},\n"
            "        namespace: ns, insecure: true}\n"
        )
        argv = ["--registries", str(registries), "status", "training-cpu-pytorch:25.03", "--catalog"]
        ran = run_cli(repo, argv, deadline=30)

    a_users_error_of(ran)  # today: still asking for the next page at 30 s
    assert next(pages) < 10_000
