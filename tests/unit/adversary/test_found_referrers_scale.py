"""Referrers at scale. docs/using/mirrors.md: "referrers are listed in index.json in one write
(10,000 referrers layout to layout: 4 s; it was 268 s)"; outside-data.md bounds a layout's
referrers at 100,000 and a manifest at 4 MiB, and promises bounded memory.

- From a layout, each referrer is found by reading and parsing the whole ``index.json`` again
  (``Layout.get_manifest`` → ``_find`` → ``index()``), so listing N referrers parses
  ``index.json`` N times: 1,000 referrers take ~40 s, 2,000 ~50-100 s, 10,000 some 20 minutes.
- An index (a layout's ``index.json``, a registry's referrers answer) that lists one referrer
  many times has it read, kept and copied once per listing: one 3.5 MB referrer listed 300 times
  (a layout of 4 MB) takes 2.2 GB of memory; 100,000 listings of a 4 MiB manifest would take
  400 GB. The report counts it 300 times."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from ..cli.hostile import REF, REPO, a_users_error, invoke, layout, publish_to, referrer_value, registries_for
from ..fake_registry import fake_registry
from ..guard.strategies import OCI_INDEX, OCI_MANIFEST, digest_of
from .proc import a_users_error_of, run_cli


def _add_referrers(root: Path, bodies: list[bytes], listed: int = 1) -> None:
    """``bodies`` as referrers in the layout at ``root``, each listed ``listed`` times."""
    index = json.loads((root / "index.json").read_text())
    for body in bodies:
        (root / "blobs" / "sha256" / digest_of(body)[7:]).write_bytes(body)
        entry = {"mediaType": OCI_MANIFEST, "digest": digest_of(body), "size": len(body)}
        index["manifests"] += [entry] * listed
    (root / "index.json").write_text(json.dumps(index))


def _image_of(root: Path) -> str:
    return str(json.loads((root / "index.json").read_text())["manifests"][0]["digest"])


def test_1500_referrers_layout_to_layout_take_seconds_not_minutes(repo: Path, tmp_path: Path) -> None:
    source = tmp_path / "source"
    layout(source)
    image = _image_of(source)
    _add_referrers(source, [json.dumps(referrer_value(image, annotations={"n": str(i)})).encode()
                            for i in range(1500)])  # fmt: skip

    ran = run_cli(repo, ["mirror", REF, "--from", f"oci:{source}", "--to", f"oci:{tmp_path / 'target'}"],
                  deadline=20)  # fmt: skip

    a_users_error_of(ran, 0)  # today: still running at 20 s (index.json parsed once per referrer)


def test_a_referrer_listed_300_times_in_a_layout_is_not_held_300_times(repo: Path, tmp_path: Path) -> None:
    source = tmp_path / "source"
    layout(source)
    pad = "x" * 3_500_000  # a referrer of 3.5 MB (a manifest may be 4 MiB)
    _add_referrers(source, [json.dumps(referrer_value(_image_of(source), annotations={"pad": pad})).encode()],
                   listed=300)  # fmt: skip

    ran = run_cli(repo, ["mirror", REF, "--from", f"oci:{source}", "--to", f"oci:{tmp_path / 'target'}",
                         "--json"], deadline=60)  # fmt: skip

    a_users_error_of(ran, 0)
    assert ran.peak_mb < 400, f"{ran.peak_mb:.0f} MB for a 4 MB layout"  # today: ~2,200 MB
    assert len(json.loads(ran.stdout)["referrers"]) == 1  # today: 300, one referrer counted 300 times


def test_a_referrer_listed_150_times_by_a_registry_is_not_held_150_times(repo: Path, tmp_path: Path) -> None:
    with fake_registry() as (host, state):
        image = publish_to(state)
        state.referrers_api = True
        body = json.dumps(referrer_value(image, annotations={"pad": "x" * 3_500_000})).encode()
        state.manifests[(REPO, digest_of(body))] = (OCI_MANIFEST, body)
        entry = {"mediaType": OCI_MANIFEST, "digest": digest_of(body), "size": len(body)}
        state.faults.referrers_body = json.dumps(
            {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [entry] * 150}
        ).encode()  # a 20 KB answer
        argv = ["--registries", str(registries_for(tmp_path, host)), "mirror", REF,
                "--from", f"{host}/{REPO}", "--to", f"oci:{tmp_path / 'target'}"]  # fmt: skip
        tracemalloc.start()
        try:
            result = invoke(repo, argv, env={"XPU_RELEASE_CACHE": str(tmp_path / "cache")}, deadline=60,
                            unstick=state.stopped.set)  # fmt: skip
            peak = tracemalloc.get_traced_memory()[1] / 1e6
        finally:
            tracemalloc.stop()

    a_users_error(result, 0)
    assert peak < 150, f"{peak:.0f} MB held for one 3.5 MB referrer"  # today: ~530 MB
