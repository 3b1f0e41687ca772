"""Floating tags of a patch: the version tag of the release it patches never moves; the line's
tag (``25.03-latest``) is moved by 25.03 and then by each of its patches, so a user who follows
the line gets the fix; ``latest`` moves only with the newest version of the image; neither ever
moves backwards."""

from __future__ import annotations

import json
from pathlib import Path

from xpu_release.manifest import Repo
from xpu_release.manifest.lines import newest_of_line
from xpu_release.manifest.registries import load_registries
from xpu_release.oci.credentials import CredentialStore
from xpu_release.oci.registry import Manifest
from xpu_release.release.model.plan import floating_tags, moving
from xpu_release.release.model.pool import EndpointPool
from xpu_release.release.publishing.tags import TagRules
from xpu_release.settings import Settings

from ..helpers import run, write_manifest
from .published_kit import CPU, NS, world

PATCH = "release:\n  patch:\n    fixes: []\n"


def patch_of(root: Path, version: str, extends: str) -> None:
    write_manifest(root, CPU, version, f'image: {CPU}\nversion: "{version}"\nextends: "{extends}"\n{PATCH}')


def tags(root: Path, version: str) -> tuple[str, ...]:
    repo = Repo(root)
    spec = repo.load(CPU, version)
    return moving(spec, newest=repo.is_latest(CPU, version), newest_of_line=newest_of_line(repo, spec))


def test_a_release_and_its_patches_move_the_lines_tag_and_latest_only_when_newest(repo: Path) -> None:
    assert floating_tags(Repo(repo).load(CPU, "25.03")) == ("latest", "25.03-latest")
    assert tags(repo, "25.03") == ("latest", "25.03-latest")

    write_manifest(repo, CPU, "25.04", f'image: {CPU}\nversion: "25.04"\nextends: "25.03"\n')
    patch_of(repo, "25.03.1", "25.03")

    assert tags(repo, "25.03.1") == ("25.03-latest",)  # the line follows the fix; latest stays on 25.04
    assert tags(repo, "25.03") == ()  # never backwards: its line has a later release
    assert tags(repo, "25.04") == ("latest", "25.04-latest")


def test_plan_says_which_floating_tags_a_patch_moves(repo: Path) -> None:
    write_manifest(repo, CPU, "25.04", f'image: {CPU}\nversion: "25.04"\nextends: "25.03"\n')
    patch_of(repo, "25.03.1", "25.03")

    patched = run(repo, "plan", f"{CPU}:25.03.1").stdout
    again = run(repo, "plan", f"{CPU}:25.03").stdout

    assert (
        f"then move egslingjun-registry.cn-wulanchabu.cr.aliyuncs.com/egslingjun/{CPU}:25.03-latest"
        in patched
    )
    assert f"latest stay where they are: {CPU}:25.04 is newer" in patched
    assert "then move" not in again
    assert "latest, 25.03-latest stay where they are" in again


def test_plan_json_lists_as_floating_refs_only_the_tags_it_moves(repo: Path) -> None:
    write_manifest(repo, CPU, "25.04", f'image: {CPU}\nversion: "25.04"\nextends: "25.03"\n')
    patch_of(repo, "25.03.1", "25.03")

    def planned(version: str) -> tuple[list[str], set[str]]:
        said = json.loads(run(repo, "plan", f"{CPU}:{version}", "--json").stdout)
        return said["moves"], {ref.rpartition(":")[2] for t in said["targets"] for ref in t["floating_refs"]}

    assert planned("25.03.1") == (["25.03-latest"], {"25.03-latest"})
    assert planned("25.03") == ([], set())  # nothing moves: no target lists a floating ref
    assert planned("25.04") == (["latest", "25.04-latest"], {"latest", "25.04-latest"})


def test_publish_moves_only_the_tags_it_is_given_at_every_endpoint(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        patch_of(w.root, "25.03.1", "25.03")
        spec = Repo(w.root).load(CPU, "25.03.1")
        digest = w.publish(CPU, "25.03.1", None)
        source = w.client.get_manifest(f"{NS}/{CPU}", digest)
        assert isinstance(source, Manifest)
        pool = EndpointPool(
            spec, load_registries(w.root, str(w.registries)), CredentialStore.from_settings(Settings())
        )
        rules = TagRules(spec, pool, None, allow_overwrite=False, workers=1, on_line=lambda _: None)

        moved = rules.move_floating(source, ("25.03-latest",))

        served = {tag: w.client.head_manifest(f"{NS}/{CPU}", tag) for tag in ("25.03-latest", "latest")}
    assert served == {"25.03-latest": digest, "latest": None}
    assert len(moved) == 3  # the public endpoint and both regions
    assert all(ref.endswith(f"/{CPU}:25.03-latest") for ref in moved)
