"""eStargz releases on the real stack: the fixture image with ``layers: estargz`` is built (its
own layers written as eStargz, the profile's file first), tested, published and verified; the
image every endpoint serves is the tested one; the stargz snapshotter's own reader accepts every
layer as served; two clean builds give the same image; plain Docker and skopeo take it as any
image; and a TOC that lies is named by ``verify --deep`` and refused by ``mirror``."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from xpu_release.oci.estargz import TOC_DIGEST_ANNOTATION, UNCOMPRESSED_SIZE_ANNOTATION
from xpu_release.oci.registry import OCI_MANIFEST, Manifest, sha256_digest

from ..estargz_tool import check
from ..unit.oci.estargz_layers import toc_of, with_toc
from .conftest import ArtifactServer, Cli, make_repo
from .test_attestations import ENDPOINTS, skopeo
from .test_publish import REF, endpoint_client, registries_file

pytestmark = pytest.mark.integration

PROFILE = "/opt/blob/hello.txt\n/usr/bin/python3.11\n"


@pytest.fixture(scope="module")
def lazy(tmp_path_factory: pytest.TempPathFactory, artifact_server: ArtifactServer) -> Cli:
    """A repository copy whose fixture image is eStargz, with a profile, built and tested."""
    import os

    root = make_repo(tmp_path_factory.mktemp("lazy") / "repo", artifact_server)
    (root / "images" / "xpu-fixture" / "image.yaml").write_text("template: Dockerfile.j2\nlayers: estargz\n")
    env = {**os.environ, "XPU_RELEASE_ARTIFACT_TOKEN": artifact_server.token}
    env.pop("XPU_RELEASE_ROOT", None)
    cli = Cli(root=root, env=env)
    cli.run("render", REF, check=True)
    (root / "images" / "xpu-fixture" / "1.0" / "prefetch.txt").write_text(PROFILE)
    cli.run("lock", REF, check=True)
    cli.run("build", REF, "--no-cache", check=True, timeout=1800)
    cli.run("test", REF, check=True)
    return cli


def _image_id(cli: Cli) -> str:
    from xpu_release.image.engine import Engine

    return Engine.connect().require_image(f"{REF}").id


def test_an_estargz_release_serves_the_tested_image_and_the_snapshotters_reader_takes_each_layer(
    lazy: Cli, tmp_path: Path
) -> None:
    namespace = "z" + uuid.uuid4().hex[:10]
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    published = lazy.run("--registries", str(regs), "publish", REF, "--record", str(tmp_path / "record.json"))
    verified = lazy.run("--registries", str(regs), "verify", REF, "--deep")
    client, repo = endpoint_client(lazy, regs)
    manifest = client.get_manifest(repo, "1.0")
    assert published.returncode == 0, published.stderr
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert manifest is not None
    assert manifest.config_digest == _image_id(lazy)  # the tested image, TOCs and all
    layers = manifest.layers
    lazy_layers = [d for d in layers if TOC_DIGEST_ANNOTATION in d.annotations]
    assert len(lazy_layers) >= 2  # the image's own layers (the base's are the base's)
    assert all(TOC_DIGEST_ANNOTATION not in d.annotations for d in layers[: len(layers) - len(lazy_layers)])
    landmarks = []
    for d in lazy_layers:
        blob = tmp_path / d.digest.replace(":", "-")
        blob.write_bytes(data := client.blob_bytes(repo, d.digest))
        read = check(blob, d.annotations[TOC_DIGEST_ANNOTATION])
        assert read.returncode == 0, read.stderr
        assert int(d.annotations[UNCOMPRESSED_SIZE_ANNOTATION]) > 0
        landmarks.append(read.stdout.splitlines()[-1].rsplit(" ", 1)[-1])
        # The profile's file comes before the landmark in its layer: the TOC's order, which the
        # snapshotter prefetches by (the reader's walk above lists a folder's children in Go's
        # map order, which says nothing about it).
        names = [e["name"] for e in toc_of(data)["entries"]]
        if "opt/blob/hello.txt" in names:
            assert names.index("opt/blob/hello.txt") < names.index(".prefetch.landmark"), names[:8]
    assert ".prefetch.landmark" in landmarks
    # A mirror copies the manifest byte for byte: the annotations travel with it.
    usb = tmp_path / "usb"
    mirrored = lazy.run("--registries", str(regs), "mirror", REF, "--to", f"oci:{usb}")
    raw = skopeo("inspect", "--raw", f"oci:{usb}:1.0", host=ENDPOINTS[0])
    assert mirrored.returncode == 0, mirrored.stderr
    assert raw.returncode == 0, raw.stderr
    assert json.loads(raw.stdout)["layers"] == json.loads(manifest.body)["layers"]


def test_two_clean_builds_give_the_same_estargz_image_and_skopeo_keeps_its_digest(
    lazy: Cli, tmp_path: Path
) -> None:
    first = _image_id(lazy)
    again = lazy.run("build", REF, "--no-cache", "--json", timeout=1800)
    namespace = "y" + uuid.uuid4().hex[:10]
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    published = lazy.run("--registries", str(regs), "publish", REF, "--record", str(tmp_path / "r.json"))
    digest = json.loads((tmp_path / "r.json").read_text())["digest"]
    target = f"{ENDPOINTS[1]}/{namespace}/copied:1.0"
    copied = skopeo("copy", "--dest-tls-verify=false", f"docker://{ENDPOINTS[1]}/{namespace}/xpu-fixture:1.0",
                    f"docker://{target}", host=ENDPOINTS[1])  # fmt: skip
    inspected = skopeo("inspect", f"docker://{target}", host=ENDPOINTS[1])
    files = ["/stargz.index.json", "/opt/blob/hello.txt"]
    ran = subprocess.run(["docker", "run", "--rm", _image_id(lazy), "ls", *files],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert _image_id(lazy) == first
    assert published.returncode == 0, published.stderr
    assert copied.returncode == 0, copied.stderr
    assert inspected.returncode == 0, inspected.stderr
    assert json.loads(inspected.stdout)["Digest"] == digest  # eStargz is gzip to skopeo: nothing re-packed
    # A plain puller unpacks the TOC of the top layer as a file: what every such puller sees.
    assert ran.returncode == 0, ran.stderr


def _lying_release(lazy: Cli, regs: Path) -> str:
    """The release re-served at its tag, at every endpoint, with one eStargz layer whose TOC lies
    about a file's mode (a setuid bit) and whose annotation names that lying TOC."""
    client, repo = endpoint_client(lazy, regs)
    manifest = client.get_manifest(repo, "1.0")
    assert manifest is not None
    doc = json.loads(manifest.body)
    at = next(i for i, d in enumerate(doc["layers"]) if TOC_DIGEST_ANNOTATION in d.get("annotations", {}))
    blob = client.blob_bytes(repo, doc["layers"][at]["digest"])

    def setuid(toc: dict[str, object]) -> None:
        entries = toc["entries"]
        assert isinstance(entries, list)
        victim = next(e for e in entries if e["type"] == "reg" and e.get("size"))
        victim["mode"] = 0o4755

    lying, notes = with_toc(blob, setuid)
    digest = sha256_digest(lying)
    doc["layers"][at] = {**doc["layers"][at], "digest": digest, "size": len(lying), "annotations": notes}
    body = json.dumps(doc).encode()
    forged = Manifest(digest=sha256_digest(body), media_type=OCI_MANIFEST, body=body)
    path = regs.parent / "lying.blob"
    path.write_bytes(lying)
    from xpu_release.manifest.registries import load_registries

    for ep in load_registries(lazy.root, str(regs)).publish_endpoints():
        c, r = endpoint_client(lazy, regs, ep.name)
        c.upload_blob(r, digest, path)
        c.put_manifest(r, "1.0", forged)
    return forged.digest


def test_a_toc_that_lies_is_named_by_verify_deep_and_refused_by_mirror(lazy: Cli, tmp_path: Path) -> None:
    namespace = "x" + uuid.uuid4().hex[:10]
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    assert (
        lazy.run("--registries", str(regs), "publish", REF, "--record", str(tmp_path / "r.json")).returncode
        == 0
    )
    forged = _lying_release(lazy, regs)
    shallow = lazy.run("--registries", str(regs), "verify", REF)
    deep = lazy.run("--registries", str(regs), "verify", REF, "--deep")
    mirrored = lazy.run("--registries", str(regs), "mirror", REF, "--to", f"oci:{tmp_path / 'usb'}")
    # The forged manifest has no documents attached: both levels say so; only the deep one reads
    # the layers, and names the TOC that lies.
    assert "eStargz" not in shallow.stdout + shallow.stderr
    assert deep.returncode == 7, deep.stdout + deep.stderr
    assert "eStargz TOC does not hold" in deep.stdout + deep.stderr
    assert "another mode" in deep.stdout + deep.stderr
    assert forged[:19] not in shallow.stdout  # the tag names the forged manifest everywhere: no disagreement
    assert mirrored.returncode != 0
    assert "whose TOC does not hold" in mirrored.stderr
    assert "Traceback" not in mirrored.stderr + deep.stderr
    assert (
        not (tmp_path / "usb" / "index.json").exists()
        or "1.0" not in (tmp_path / "usb" / "index.json").read_text()
    )


def test_the_profile_is_recorded_from_a_run_of_the_image_and_checked_current(lazy: Cli) -> None:
    path = lazy.root / "images" / "xpu-fixture" / "1.0" / "prefetch.txt"
    by_hand = lazy.run("profile", REF, "--check")
    recorded = lazy.run("profile", REF, "--json")
    again = lazy.run("profile", REF, "--check")
    assert by_hand.returncode == 1, by_hand.stderr  # the hand-written profile is not what the run opens
    assert "is stale" in by_hand.stderr
    assert f"xpu-release profile {REF}" in by_hand.stderr
    assert recorded.returncode == 0, recorded.stderr
    files = json.loads(recorded.stdout)["files"]
    assert "/opt/venv/lib/python3.11/site-packages/six.py" in files  # the smoke test's import
    assert any(f.startswith("/usr/lib/x86_64-linux-gnu/libc.so") for f in files)  # what the process mapped
    assert all(not f.startswith(("/proc/", "/tmp/")) for f in files)
    assert path.read_text().splitlines()[3:] == files
    assert again.returncode == 0, again.stderr


def test_a_runner_that_forgot_the_build_writes_the_same_estargz_layers_again(
    lazy: Cli, tmp_path: Path
) -> None:
    """With an empty cache (another runner, a cache pruned), the push has no blob for the image's
    eStargz layers: it exports them from the engine and writes them again, which must give the
    very layers the image holds (their TOC is in the tested image), so the same digest."""
    import shutil

    from xpu_release import settings

    first, second = ("w" + uuid.uuid4().hex[:10] for _ in range(2))
    regs = [registries_file(tmp_path / f"{ns}.yaml", ns) for ns in (first, second)]
    warm = lazy.run("--registries", str(regs[0]), "publish", REF, "--record", str(tmp_path / "warm.json"))
    # A cache that knows the image was tested and built here (publish refuses an untested image),
    # and nothing of its blobs: no spool, no diff_id → blob map, no config.
    cache = settings.Settings.from_env(lazy.env).cache
    forgetful = tmp_path / "forgetful-cache"
    for kept in ("tested", "builds"):
        shutil.copytree(cache / kept, forgetful / kept)
    cold = lazy.run("--registries", str(regs[1]), "publish", REF, "--record", str(tmp_path / "cold.json"),
                    env={settings.CACHE_ENV: str(forgetful)})  # fmt: skip
    assert warm.returncode == 0, warm.stderr
    assert cold.returncode == 0, cold.stderr
    assert "eStargz ones as they were built" in cold.stderr  # it did write them again
    digest = json.loads((tmp_path / "warm.json").read_text())["digest"]
    assert json.loads((tmp_path / "cold.json").read_text())["digest"] == digest
