"""``watch`` against what goes wrong at the registry: an SBOM missing, damaged or of another
format, a base tag that vanished, a registry that does not answer or answers 500 in the middle
of a run. Each release says why it could not be checked, on its own; the others are still
answered for; the run ends in the error's documented code, never 70."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ..fake_registry import Faults
from ..helpers import run, user_exit_codes
from .published_kit import CPU, SDK, TRAINING, World, sbom, world


@pytest.fixture
def w(published: World) -> World:
    published.advisory("CVE-2026-0009", "transformers", "4.50.0")
    return published


def watch(w: World) -> tuple[int, dict[str, Any], str]:
    result = run(w.root, "--registries", str(w.registries), "watch", "--advisories", str(w.osv), "--json")
    assert "Traceback" not in result.output
    return result.exit_code, {r["ref"]: r for r in json.loads(result.stdout)["releases"]}, result.stderr


def test_a_release_with_no_sbom_attached_says_so_and_the_others_are_checked(w: World) -> None:
    w.publish(CPU, "25.03", None, salt="bare")  # the version tag now serves an image with no referrers

    code, found, said = watch(w)

    assert code == 7
    training = found[f"{CPU}:25.03"]
    assert training["state"] == "could not check"
    assert training["unchecked"][0]["what"] == "sbom"
    assert "has no SBOM attached" in training["unchecked"][0]["message"]
    assert f"{CPU}:25.03: could not check its sbom: " in said
    assert found[f"{SDK}:2.13.0"]["state"] == "up to date"


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (json.dumps({"spdxVersion": "SPDX-2.3", "packages": []}).encode(), "not a CycloneDX JSON document"),
        (b"\xff\xfe not json", "is not UTF-8 text"),
        (b"{" + b"not json", "is not JSON (line 1, column 2"),
        (
            b"[" * 100_000 + b"]" * 100_000,
            "is nested 100000 levels deep; the limit is 64",
        ),  # said, not guessed
        (json.dumps({"bomFormat": "CycloneDX", "components": {"a": 1}}).encode(), "components is not a list"),
        (
            json.dumps({"bomFormat": "CycloneDX", "components": [7]}).encode(),
            "components[0] is not a component",
        ),
        (json.dumps({"bomFormat": "CycloneDX", "components": [{"purl": "pkg:"}]}).encode(), "damaged"),
    ],
)
def test_an_sbom_that_is_not_cyclonedx_is_named_not_guessed_from(w: World, payload: bytes, why: str) -> None:
    w.publish(CPU, "25.03", payload, salt="other")

    code, found, _ = watch(w)

    assert code == 7
    assert why in found[f"{CPU}:25.03"]["unchecked"][0]["message"]


def test_an_sbom_whose_bytes_are_not_what_its_digest_says_is_damaged(w: World) -> None:
    payload = sbom(*TRAINING)
    digest = "sha256:" + __import__("hashlib").sha256(payload).hexdigest()
    w.state.blobs[digest] = payload.replace(b"1.5.2", b"9.9.9")

    code, found, _ = watch(w)

    assert code == 7
    message = found[f"{CPU}:25.03"]["unchecked"][0]["message"]
    assert "SBOM" in message
    assert "digest" in message


def test_a_base_tag_that_vanished_is_said_and_the_release_is_still_scanned(w: World) -> None:
    del w.state.manifests[("base/debian/bookworm-python-cxx", "12")]

    code, found, _ = watch(w)

    assert code == 4
    sdk = found[f"{SDK}:2.13.0"]
    assert sdk["state"] == "could not check"
    assert [u["what"] for u in sdk["unchecked"]] == ["base"]
    assert "its base tag debian/bookworm-python-cxx:12 is no longer served" in sdk["unchecked"][0]["message"]
    assert sdk["scanned"] is True
    assert found[f"{CPU}:25.03"]["reasons"][0]["id"] == "CVE-2026-0009"  # still answered for


def test_a_registry_that_does_not_answer_is_a_message_per_release_and_exit_10(
    w: World, tmp_path: Path
) -> None:
    closed = tmp_path / "closed.yaml"
    closed.write_text(
        "registries:\n  hub: {host: '127.0.0.1:1', insecure: true}\n"
        "  public: {host: '127.0.0.1:1', insecure: true}\n"
        "  vpc: {hosts: {cn-beijing: '127.0.0.1:1', cn-wulanchabu: '127.0.0.1:1'}, insecure: true}\n"
    )

    result = run(w.root, "--registries", str(closed), "watch", "--advisories", str(w.osv))

    assert result.exit_code == 10
    assert "Traceback" not in result.output
    for ref in (f"{SDK}:2.13.0", f"{CPU}:25.03", "training-xpu-pytorch:25.03"):
        assert f"{ref}  could not check" in result.stdout
        assert f"{ref}: could not check its registry: public (127.0.0.1:1) does not answer" in result.stderr
    assert not (w.root / "out").exists()  # no answer, no history


@pytest.mark.parametrize(
    "body",
    [b"<html>busy</html>", json.dumps({"tags": [1, 2]}).encode(), json.dumps({"tags": "25.03.1"}).encode()],
)
def test_a_tag_list_that_is_not_one_is_said_per_release_with_exit_7(w: World, body: bytes) -> None:
    """The tags are read for the patches a scheduled run published and nobody committed yet: a
    list that cannot be read leaves the release unchecked (never read as "no patch")."""
    w.state.faults.tags_body = body

    code, found, said = watch(w)

    assert code == 7
    training = found[f"{CPU}:25.03"]
    assert (training["state"], training["unchecked"][0]["what"]) == ("could not check", "registry")
    assert f"did not give the tags of {CPU}" in training["unchecked"][0]["message"]
    assert f"{CPU}:25.03: could not check its registry: " in said


def test_a_registry_answering_500_in_the_middle_of_a_run_fails_only_what_it_did_not_answer(
    w: World, tmp_path: Path
) -> None:
    watcher = w.watcher(tmp_path / "cache")

    first = watcher.watch(f"{SDK}:2.13.0")
    w.state.faults.unavailable = 10_000  # from now on: 503 to every request
    second = watcher.watch(f"{CPU}:25.03")
    w.state.faults.unavailable = 0
    watcher.advisories.close()

    assert first.state == "up to date"
    assert second.state == "could not check"
    assert second.unchecked[0].exit_code == 10
    assert "does not answer" in second.unchecked[0].message


@settings(max_examples=15)
@given(
    unavailable=st.integers(0, 8),
    wrong_digest=st.booleans(),
    cut=st.integers(0, 3),
    payload=st.binary(max_size=200) | st.just(sbom(*TRAINING)),
    command=st.sampled_from([["watch", "--json"], ["watch", "--release"], ["patch", f"{CPU}:25.03"]]),
)
def test_whatever_the_registry_answers_watch_and_patch_end_in_a_documented_code(
    tmp_path_factory: pytest.TempPathFactory, unavailable: int, wrong_digest: bool, cut: int, payload: bytes,
    command: list[str],
) -> None:  # fmt: skip
    with world(tmp_path_factory.mktemp("w")) as made:
        made.released()
        made.publish(CPU, "25.03", payload, salt="generated")
        made.advisory("CVE-2026-0009", "transformers", "4.50.0")
        made.state.faults = Faults(
            unavailable=unavailable, wrong_digest_header=wrong_digest, cut_blob_gets=cut
        )

        with pytest.MonkeyPatch.context() as env:  # pip asks no index: patch finds no fix there, offline
            env.setenv("PIP_CONFIG_FILE", "/dev/null")
            env.setenv("PIP_NO_INDEX", "1")
            result = run(
                made.root, "--registries", str(made.registries), *command, "--advisories", str(made.osv)
            )

    assert result.exit_code in user_exit_codes(), result.output[-2000:]
    assert "Traceback" not in result.output
