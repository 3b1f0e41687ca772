"""Publish for real: the local public registry (TLS + htpasswd) and three VPC regions, with an
outside client (skopeo) confirming the result, and faults injected by a proxy."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.errors import WireError
from xpu_release.manifest.registries import load_registries
from xpu_release.oci.registry import RegistryClient, RetryPolicy

from .conftest import Cli
from .faultproxy import FaultProxy

pytestmark = pytest.mark.integration

REF = "xpu-fixture:1.0"
REGIONS = {
    "cn-beijing": "127.0.0.1:15002",
    "cn-wulanchabu": "127.0.0.1:15003",
    "cn-shanghai": "127.0.0.1:15004",
}


@pytest.fixture
def namespace() -> str:
    return "t" + uuid.uuid4().hex[:10]


def registries_file(path: Path, namespace: str, hosts: dict[str, str] | None = None) -> Path:
    stack = os.environ["XPU_STACK_DIR"]
    regions = hosts or REGIONS
    lines = [
        "registries:",
        f"  public: {{host: '127.0.0.1:15001', namespace: {namespace}, ca_file: {stack}/certs/ca.crt}}",
        f"  vpc:\n    namespace: {namespace}\n    insecure: true",
        f"    regions: [{', '.join(regions)}]",
        "    hosts:",
        *(f"      {r}: '{h}'" for r, h in regions.items()),
        "  hub: {host: '127.0.0.1:15000', namespace: base, insecure: true}",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def publish(
    cli: Cli, regs: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    record = regs.with_suffix(".record.json")
    cmd = ["--registries", str(regs), "publish", REF, "--record", str(record), *args]
    if stdin is None:
        return cli.run(*cmd, env=env)
    import sys

    return subprocess.run(
        [sys.executable, "-m", "xpu_release", "--root", str(cli.root), *cmd],
        input=stdin,
        capture_output=True,
        text=True,
        env={**cli.env, **(env or {})},
        check=False,
    )


def record_of(regs: Path) -> dict[str, object]:
    return json.loads(regs.with_suffix(".record.json").read_text())  # type: ignore[no-any-return]


def endpoint_client(
    cli: Cli, regs: Path, endpoint: str | None = None, image: str = "xpu-fixture"
) -> tuple[RegistryClient, str]:
    """Our own client for one endpoint of ``regs`` (the first one by default) and the image's
    repository there; credentials from the docker config, as an outside user has them."""
    from xpu_release.oci.credentials import CredentialStore
    from xpu_release.settings import Settings

    endpoints = load_registries(cli.root, str(regs)).publish_endpoints()
    ep = next(e for e in endpoints if e.name == endpoint) if endpoint else endpoints[0]
    store = CredentialStore.from_settings(Settings.from_env(os.environ))
    return RegistryClient(ep, store.for_host(ep.host), RetryPolicy(attempts=1)), ep.repository(image)


def served(cli: Cli, regs: Path, tag: str, image: str = "xpu-fixture") -> dict[str, str | None]:
    """What each endpoint serves for ``tag``, asked with our own client."""
    out = {}
    for ep in load_registries(cli.root, str(regs)).publish_endpoints():
        client, repo = endpoint_client(cli, regs, ep.name, image)
        try:
            out[ep.name] = client.head_manifest(repo, tag)
        except WireError:
            out[ep.name] = "unreachable"
    return out


def stored_blob(registry: str, digest: str) -> Path:
    """Where one of the stack's registries keeps a blob on disk (to damage it on purpose)."""
    hexd = digest.split(":")[1]
    return (
        Path(os.environ["XPU_STACK_DIR"]) / "registries" / registry / "data" / "docker" / "registry"
        / "v2" / "blobs" / "sha256" / hexd[:2] / hexd / "data"
    )  # fmt: skip


def skopeo_digest(ref: str) -> str:
    args = ["skopeo", "inspect", "--authfile", f"{os.environ['DOCKER_CONFIG']}/config.json"]
    if ref.startswith("127.0.0.1:15001"):
        args += ["--cert-dir", os.environ["XPU_STACK_CERT_DIR"]]
    else:
        args += ["--tls-verify=false"]
    proc = subprocess.run([*args, f"docker://{ref}"], capture_output=True, text=True, check=True)
    return str(json.loads(proc.stdout)["Digest"])


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    p = FaultProxy(REGIONS["cn-shanghai"])
    yield p
    p.close()


def test_publish_reaches_every_endpoint_with_the_tested_digest(
    tested: Cli, tmp_path: Path, namespace: str
) -> None:
    regs = registries_file(tmp_path / "regs.yaml", namespace)

    result = publish(tested, regs)

    assert result.returncode == 0, result.stderr
    record = record_of(regs)
    assert record["complete"] is True
    digest = record["digest"]
    endpoints = record["endpoints"]
    assert isinstance(endpoints, list)
    assert [e["endpoint"] for e in endpoints] == [
        "public",
        "vpc/cn-beijing",
        "vpc/cn-wulanchabu",
        "vpc/cn-shanghai",
    ]
    assert all(e["status"] == "verified" and e["digest"] == digest for e in endpoints)
    assert set(served(tested, regs, "1.0").values()) == {digest}
    assert set(served(tested, regs, "latest").values()) == {digest}
    # An outside client agrees, endpoint by endpoint.
    for e in endpoints:
        assert skopeo_digest(e["version_ref"]) == digest
    # The manifest's config is the image the smoke tests ran against.
    import docker

    tested_id = docker.from_env(version="auto").api.inspect_image(REF)["Id"]
    assert record["tested_image_id"] == tested_id


def test_a_rerun_is_a_verified_no_op(tested: Cli, tmp_path: Path, namespace: str) -> None:
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    assert publish(tested, regs).returncode == 0

    again = publish(tested, regs, "--json")

    assert again.returncode == 0, again.stderr
    record = json.loads(again.stdout)
    assert record["complete"] is True
    assert [e["status"] for e in record["endpoints"][1:]] == ["unchanged"] * 3
    assert sum(e["uploaded_bytes"] for e in record["endpoints"]) == 0


def test_zstd_layers_only_when_the_pullers_read_them_and_a_fresh_runner_checks_them_by_unpacking(
    tested: Cli, tmp_path: Path, namespace: str
) -> None:
    regs = registries_file(tmp_path / "regs.yaml", namespace)

    refused = publish(tested, regs, "--compression", "zstd")

    assert refused.returncode == 3
    assert "Docker before 23" in refused.stderr
    assert set(served(tested, regs, "1.0").values()) == {None}

    from xpu_release.settings import Settings

    cache = Settings.from_env({**os.environ, **tested.env}).cache

    def forget(*names: str) -> None:  # what this runner knows of blobs it made or checked
        for name in names:
            for folder in cache.glob(name):
                shutil.rmtree(folder)

    forget("compressed/zstd-*")  # nothing compressed ahead by an earlier run of this test
    result = publish(tested, regs, "--compression", "zstd:3", "--pullers-accept-zstd")

    assert result.returncode == 0, result.stderr
    assert "(zstd, zstd:3)" in result.stderr
    client, repo = endpoint_client(tested, regs)
    manifest = client.get_manifest(repo, "1.0")
    assert manifest is not None
    layers = manifest.layers
    assert {layer.media_type for layer in layers} == {"application/vnd.oci.image.layer.v1.tar+zstd"}
    # An outside reader unpacks them: skopeo recompresses every layer as gzip on the way out, and
    # each gzip layer unpacks to the tested image's own layer.
    out = tmp_path / "layout"
    subprocess.run(
        ["skopeo", "copy", "--authfile", f"{os.environ['DOCKER_CONFIG']}/config.json", "--src-cert-dir",
         os.environ["XPU_STACK_CERT_DIR"], "--dest-compress-format", "gzip", "--dest-compress",
         f"docker://127.0.0.1:15001/{namespace}/xpu-fixture:1.0", f"oci:{out}:x"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    index = json.loads((out / "index.json").read_text())
    copied = json.loads((out / "blobs" / index["manifests"][0]["digest"].replace(":", "/")).read_text())
    config = json.loads((out / "blobs" / copied["config"]["digest"].replace(":", "/")).read_text())
    import gzip
    import hashlib

    def unpack(layer: dict[str, str]) -> str:
        data = gzip.decompress((out / "blobs" / layer["digest"].replace(":", "/")).read_bytes())
        return "sha256:" + hashlib.sha256(data).hexdigest()

    unpacked = [unpack(layer) for layer in copied["layers"]]
    assert unpacked == config["rootfs"]["diff_ids"]

    # A runner that never saw those blobs unpacks each served layer to check it is the tested
    # image's, and sends nothing.
    forget("compressed/zstd-*", "unpacked")
    fresh = publish(tested, regs, "--json")

    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stderr.count("to check it") >= len(layers)
    record = json.loads(fresh.stdout)
    assert record["complete"] is True
    assert sum(e["uploaded_bytes"] for e in record["endpoints"]) == 0


def test_dry_run_touches_nothing(tested: Cli, tmp_path: Path, namespace: str) -> None:
    regs = registries_file(tmp_path / "regs.yaml", namespace)

    result = publish(tested, regs, "--dry-run")

    assert result.returncode == 0
    assert f"127.0.0.1:15002/{namespace}/xpu-fixture:1.0" in result.stdout
    assert "then move 127.0.0.1:15001" in result.stdout
    assert set(served(tested, regs, "1.0").values()) == {None}


def test_a_version_tag_with_other_content_is_refused_and_nothing_moves(
    tested: Cli, tmp_path: Path, namespace: str, hub_base: str
) -> None:
    from xpu_release.image.engine import Engine

    engine = Engine.connect()
    other = f"127.0.0.1:15003/{namespace}/xpu-fixture:1.0"
    engine.tag(hub_base, other)
    engine.push(other, None, on_line=lambda _: None)
    regs = registries_file(tmp_path / "regs.yaml", namespace)

    result = publish(tested, regs)

    assert result.returncode == 9
    assert "version tags are immutable" in result.stderr
    assert other in result.stderr
    assert "nothing was pushed" in result.stderr
    now = served(tested, regs, "1.0")
    assert now["public"] is None
    assert now["vpc/cn-beijing"] is None
    assert set(served(tested, regs, "latest").values()) == {None}

    forced = publish(tested, regs, "--allow-overwrite")

    assert forced.returncode == 0, forced.stderr
    assert len(set(served(tested, regs, "1.0").values())) == 1


def test_a_wrong_password_is_refused_and_never_printed(tested: Cli, tmp_path: Path, namespace: str) -> None:
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    password = "not-the-password-" + uuid.uuid4().hex

    result = publish(tested, regs, "--username", "xpu", "--password-stdin", stdin=password + "\n")

    assert result.returncode == 8, result.stderr
    assert password not in result.stdout + result.stderr
    record_file = regs.with_suffix(".record.json")
    assert not record_file.exists() or password not in record_file.read_text()


def test_missing_credentials_are_an_auth_error(tested: Cli, tmp_path: Path, namespace: str) -> None:
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    empty = tmp_path / "docker-config"
    empty.mkdir()

    result = publish(tested, regs, env={"DOCKER_CONFIG": str(empty)})

    assert result.returncode == 8, result.stderr
    assert "127.0.0.1:15001" in result.stderr


def test_the_bearer_token_flow(tested: Cli, tmp_path: Path, namespace: str, proxy: FaultProxy) -> None:
    proxy.faults.bearer = ("robot", "token-secret-" + uuid.uuid4().hex)
    regs = registries_file(tmp_path / "regs.yaml", namespace, {"cn-shanghai": proxy.host})
    # Credentials for both: the stack's public registry and the token service behind the proxy.
    creds = tmp_path / "config"
    creds.mkdir()
    public = json.loads(Path(os.environ["DOCKER_CONFIG"], "config.json").read_text())
    token_auth = base64.b64encode(":".join(proxy.faults.bearer).encode()).decode()
    public["auths"][proxy.host] = {"auth": token_auth}
    (creds / "config.json").write_text(json.dumps(public))
    env = {"DOCKER_CONFIG": str(creds)}

    result = publish(tested, regs, env=env)

    assert result.returncode == 0, result.stderr
    assert proxy.faults.tokens_issued >= 1
    assert proxy.faults.bearer[1] not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("fault", "value"),
    [("throttle", 3), ("unavailable", 4), ("reset_uploads", 1), ("delay", 0.05)],
    ids=["429-retry-after", "503-burst", "reset-mid-upload", "slow"],
)
def test_transient_faults_end_verified(
    tested: Cli, tmp_path: Path, namespace: str, proxy: FaultProxy, fault: str, value: float
) -> None:
    regs = registries_file(tmp_path / "regs.yaml", namespace, {**REGIONS, "cn-shanghai": proxy.host})
    setattr(proxy.faults, fault, value)
    started = time.monotonic()

    result = publish(tested, regs)

    assert result.returncode == 0, result.stderr
    record = record_of(regs)
    assert record["complete"] is True
    shanghai = record["endpoints"][-1]  # type: ignore[index]
    assert shanghai["status"] == "verified"
    if fault == "throttle":
        assert shanghai["retries"] >= 3
        assert time.monotonic() - started >= 3  # Retry-After: 1, three times
    if fault in ("unavailable", "reset_uploads"):
        assert shanghai["retries"] >= 1
    assert len(set(served(tested, regs, "1.0").values())) == 1


def test_a_region_down_for_good_fails_cleanly_and_a_rerun_finishes(
    tested: Cli, tmp_path: Path, namespace: str, proxy: FaultProxy
) -> None:
    regs = registries_file(tmp_path / "regs.yaml", namespace, {**REGIONS, "cn-shanghai": proxy.host})
    proxy.faults.down = True

    failed = publish(tested, regs)

    assert failed.returncode == 7
    assert "vpc/cn-shanghai" in failed.stderr
    assert "no floating tag was moved" in failed.stderr
    record = record_of(regs)
    assert record["complete"] is False
    assert [e["status"] for e in record["endpoints"]] == ["staged", "staged", "staged", "failed"]  # type: ignore[union-attr]
    # No half-visible release: the endpoints that hold it by digest serve no version tag yet.
    assert set(served(tested, regs, "1.0").values()) == {None, "unreachable"}
    assert set(served(tested, regs, "latest").values()) == {None, "unreachable"}

    proxy.faults.down = False
    uploads_before = proxy.faults.uploads_completed
    rerun = publish(tested, regs, "--json")

    assert rerun.returncode == 0, rerun.stderr
    record = json.loads(rerun.stdout)
    assert record["complete"] is True
    assert [e["status"] for e in record["endpoints"]] == ["verified"] * 4
    # Only the region that had nothing received uploads; the others re-uploaded nothing.
    assert sum(e["uploaded_bytes"] for e in record["endpoints"][:3]) == 0
    assert proxy.faults.uploads_completed > uploads_before
    assert len({d for d in served(tested, regs, "latest").values()}) == 1


def test_interrupting_publish_then_rerunning_ends_verified(
    tested: Cli, tmp_path: Path, namespace: str, proxy: FaultProxy
) -> None:
    regs = registries_file(tmp_path / "regs.yaml", namespace, {**REGIONS, "cn-shanghai": proxy.host})
    proxy.faults.delay = 0.5  # keep it busy long enough to be interrupted mid-copy
    proc = tested.popen(
        "--registries", str(regs), "publish", REF, "--record", str(regs.with_suffix(".record.json"))
    )
    deadline = time.monotonic() + 120
    while not any("/blobs/" in s for s in proxy.faults.seen) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)

    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err

    proxy.faults.delay = 0.0
    rerun = publish(tested, regs)

    assert rerun.returncode == 0, rerun.stderr
    assert record_of(regs)["complete"] is True
    assert len(set(served(tested, regs, "1.0").values())) == 1


def test_regions_get_each_blob_during_the_first_push_and_serve_nothing_if_it_fails(
    tested: Cli, tmp_path: Path, namespace: str
) -> None:
    # The first endpoint takes every blob but refuses the manifest: the push fails at its very
    # end. By then every region already holds every layer (sent as each was compressed, not
    # after the first push), and no region serves a manifest or a tag.
    source = FaultProxy("127.0.0.1:15000")  # the stack's hub registry, as a plain-HTTP source
    try:
        source.faults.refuse_put = "/manifests/"
        regs = tmp_path / "regs.yaml"
        regs.write_text(
            "registries:\n"
            f"  public: {{host: '{source.host}', namespace: {namespace}, insecure: true}}\n"
            f"  vpc:\n    namespace: {namespace}\n    insecure: true\n"
            f"    regions: [{', '.join(REGIONS)}]\n    hosts:\n"
            + "".join(f"      {r}: '{h}'\n" for r, h in REGIONS.items())
        )

        result = publish(tested, regs, "--json")

        assert result.returncode == 7, result.stderr
        record = json.loads(result.stdout)
        assert [e["status"] for e in record["endpoints"]] == ["failed", "planned", "planned", "planned"]
        assert "not staged: public (the source) failed" in record["endpoints"][1]["error"]
        image_id = record["tested_image_id"]
        puts = [s for s in source.faults.seen if s.startswith("PUT ") and "digest=" in s]
        sent = {s.split("digest=")[1].split("&")[0] for s in puts}
        layers = sent - {image_id}
        assert len(layers) >= 2, source.faults.seen
        for region in REGIONS:
            client, repo = endpoint_client(tested, regs, f"vpc/{region}")
            assert all(client.blob_exists(repo, d) for d in layers), region
            assert client.head_manifest(repo, "1.0") is None
            assert client.head_manifest(repo, "latest") is None
    finally:
        source.close()


def test_status_compares_every_endpoint_with_the_record(tested: Cli, tmp_path: Path, namespace: str) -> None:
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    assert publish(tested, regs).returncode == 0
    record = regs.with_suffix(".record.json")

    result = tested.run("--registries", str(regs), "status", REF, "--record", str(record), "--json")

    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["endpoints"]
    assert len(rows) == 12  # four endpoints, three tags each (1.0, latest, the line's 1.0-latest)
    assert all(r["matches"] for r in rows)


def test_chunked_uploads_end_verified(tested: Cli, tmp_path: Path, namespace: str, proxy: FaultProxy) -> None:
    regs = registries_file(tmp_path / "regs.yaml", namespace, {**REGIONS, "cn-shanghai": proxy.host})

    result = publish(tested, regs, "--chunk-size", str(4 << 20))

    assert result.returncode == 0, result.stderr
    patches = [s for s in proxy.faults.seen if s.startswith("PATCH ")]
    assert len(patches) >= 10  # the 170 MB base layer alone is over 40 chunks of 4 MiB
    assert len(set(served(tested, regs, "1.0").values())) == 1


def test_a_region_in_the_source_registry_gets_blobs_by_mount(
    tested: Cli, tmp_path: Path, namespace: str
) -> None:
    stack = os.environ["XPU_STACK_DIR"]
    regs = tmp_path / "regs.yaml"
    regs.write_text(
        "registries:\n"
        f"  public: {{host: '127.0.0.1:15001', namespace: {namespace}, ca_file: {stack}/certs/ca.crt}}\n"
        f"  vpc:\n    namespace: {namespace}-vpc\n    ca_file: {stack}/certs/ca.crt\n"
        "    regions: [cn-wulanchabu]\n    hosts: {cn-wulanchabu: '127.0.0.1:15001'}\n"
    )

    result = publish(tested, regs, "--json")

    assert result.returncode == 0, result.stderr
    region = json.loads(result.stdout)["endpoints"][1]
    assert region["status"] == "verified"
    assert region["mounted_blobs"] >= 2
    assert region["uploaded_bytes"] == 0


def test_the_catalog_lists_every_tag_per_endpoint(tested: Cli, tmp_path: Path, namespace: str) -> None:
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    assert publish(tested, regs).returncode == 0
    digest = record_of(regs)["digest"]

    result = tested.run("--registries", str(regs), "status", REF, "--catalog", "--json")

    assert result.returncode == 0, result.stderr
    catalog = json.loads(result.stdout)
    assert set(catalog["endpoints"]) == {"public", "vpc/cn-beijing", "vpc/cn-wulanchabu", "vpc/cn-shanghai"}
    assert all(
        tags == {"1.0": digest, "latest": digest, "1.0-latest": digest}
        for tags in catalog["endpoints"].values()
    )
    assert catalog["errors"] == {}


def test_a_region_unreachable_during_the_check_is_still_held_to_immutability(
    tested: Cli, tmp_path: Path, namespace: str, proxy: FaultProxy, hub_base: str
) -> None:
    from xpu_release.image.engine import Engine

    engine = Engine.connect()
    other = f"{REGIONS['cn-shanghai']}/{namespace}/xpu-fixture:1.0"
    engine.tag(hub_base, other)
    engine.push(other, None, on_line=lambda _: None)
    regs = registries_file(tmp_path / "regs.yaml", namespace, {**REGIONS, "cn-shanghai": proxy.host})
    proxy.faults.unavailable = 6  # exactly the attempts of the up-front check: it sees the region down

    result = publish(tested, regs)

    assert result.returncode == 7, result.stderr
    record = record_of(regs)
    shanghai = record["endpoints"][-1]  # type: ignore[index]
    assert shanghai["status"] == "failed"
    assert "holds other content" in shanghai["error"]
    assert served(tested, regs, "1.0")["vpc/cn-shanghai"] != record["digest"]
    assert set(served(tested, regs, "latest").values()) == {None}


def _spool(cache: Path) -> Path:
    return cache / "oci-blobs"


def test_two_publishes_at_once_sharing_one_cache_both_end_verified(tested: Cli, tmp_path: Path) -> None:
    # The engine makes the first push, so both runs download the same blobs into one spool at
    # the same moment: each download has a file of its own, renamed into place.
    cache = tmp_path / "shared-cache"
    env = {"XPU_RELEASE_CACHE": str(cache)}
    tested.run("test", REF, env=env, check=True)  # the smoke-test marker lives in the cache
    procs = []
    for n in range(2):
        regs = registries_file(tmp_path / f"regs{n}.yaml", "c" + uuid.uuid4().hex[:10])
        record = regs.with_suffix(".record.json")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "xpu_release", "--root", str(tested.root), "--registries", str(regs),
             "publish", REF, "--engine-push", "--record", str(record)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**tested.env, **env},
        ))  # fmt: skip
    results = [p.communicate(timeout=600) for p in procs]

    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
        assert "FileNotFoundError" not in err
    assert not list(_spool(cache).glob("*.partial"))


def test_a_damaged_blob_cache_entry_is_fetched_again_and_named(tested: Cli, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {"XPU_RELEASE_CACHE": str(cache)}
    tested.run("test", REF, env=env, check=True)  # the smoke-test marker lives in the cache
    first = registries_file(tmp_path / "regs1.yaml", "d" + uuid.uuid4().hex[:10])
    assert publish(tested, first, "--engine-push", env=env).returncode == 0
    blobs = sorted(_spool(cache).glob("sha256-*"), key=lambda p: p.stat().st_size)
    damaged = blobs[-1]
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))

    second = registries_file(tmp_path / "regs2.yaml", "d" + uuid.uuid4().hex[:10])
    result = publish(tested, second, "--engine-push", env=env)

    assert result.returncode == 0, result.stderr
    assert f"the blob cache {_spool(cache)} held a damaged" in result.stderr
    assert record_of(second)["complete"] is True


def test_a_manifest_with_the_tested_config_but_another_layer_is_refused(
    tested: Cli, tmp_path: Path, namespace: str
) -> None:
    import gzip
    import io
    import tarfile

    from xpu_release.oci.registry import Manifest, sha256_digest

    # The real release, published elsewhere, gives the tested config and layers.
    real = registries_file(tmp_path / "real.yaml", "r" + uuid.uuid4().hex[:10])
    assert publish(tested, real).returncode == 0
    src, src_repo = endpoint_client(tested, real, "public")
    genuine = src.get_manifest(src_repo, "1.0")
    assert genuine is not None
    # An attacker's manifest at our version tag: the same config, the last layer swapped.
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("opt/evil")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"evil\n"))
    evil = gzip.compress(buf.getvalue(), mtime=0)
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    dst, dst_repo = endpoint_client(tested, regs, "public")
    for digest, _size in genuine.blobs():
        assert dst.mount_blob(dst_repo, digest, src_repo)
    evil_path = tmp_path / "evil.tar.gz"
    evil_path.write_bytes(evil)
    dst.upload_blob(dst_repo, sha256_digest(evil), evil_path)
    data = json.loads(genuine.body)
    data["layers"][-1] = {**data["layers"][-1], "digest": sha256_digest(evil), "size": len(evil)}
    body = json.dumps(data).encode()
    dst.put_manifest(
        dst_repo, "1.0", Manifest(digest=sha256_digest(body), media_type=genuine.media_type, body=body)
    )

    result = publish(tested, regs)

    assert result.returncode == 9, result.stderr
    assert "holds other content" in result.stderr or "already published with other content" in result.stderr
    assert "unpacks to" in result.stderr
    served_now = served(tested, regs, "1.0")
    assert served_now["public"] == sha256_digest(body)  # untouched, and nothing adopted it
    assert [served_now[f"vpc/{r}"] for r in REGIONS] == [None, None, None]
    assert set(served(tested, regs, "latest").values()) == {None}


def test_verify_deep_finds_a_flipped_byte_in_a_region_and_names_it(
    tested: Cli, tmp_path: Path, namespace: str
) -> None:
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    assert publish(tested, regs).returncode == 0
    record = record_of(regs)
    client, repo = endpoint_client(tested, regs, "vpc/cn-beijing")
    manifest = client.get_manifest(repo, "1.0")
    assert manifest is not None
    digest, _size = max(manifest.blobs(), key=lambda b: b[1])
    stored = stored_blob("vpc-cn-beijing", digest)
    original = stored.read_bytes()
    flipped = bytearray(original)
    flipped[len(flipped) // 3] ^= 0x01
    stored.write_bytes(bytes(flipped))
    try:
        shallow = tested.run(
            "--registries", str(regs), "verify", REF, "--record", str(regs.with_suffix(".record.json"))
        )
        deep = tested.run(
            "--registries",
            str(regs),
            "verify",
            REF,
            "--deep",
            "--record",
            str(regs.with_suffix(".record.json")),
        )
    finally:
        stored.write_bytes(original)  # blobs are shared by every repository of that registry

    assert shallow.returncode == 0, shallow.stderr  # same size: only hashing can tell
    assert deep.returncode == 7, deep.stderr
    assert "vpc/cn-beijing" in deep.stderr
    assert digest in deep.stderr
    assert "hash to" in deep.stderr
    assert record["digest"] in tested.run("--registries", str(regs), "verify", REF, "--deep").stdout


def _wrong_ca(folder: Path) -> Path:
    """A CA that did not sign the stack's public registry certificate."""
    ca = folder / "wrong-ca.crt"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", str(folder / "wrong-ca.key"), "-out", str(ca), "-days", "1",
         "-subj", "/CN=not-the-stack"],
        check=True, capture_output=True,
    )  # fmt: skip
    return ca


def test_a_failed_run_never_overwrites_a_complete_record(tested: Cli, tmp_path: Path, namespace: str) -> None:
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    assert publish(tested, regs).returncode == 0
    good = regs.with_suffix(".record.json").read_text()
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(
        regs.read_text().replace(f"{os.environ['XPU_STACK_DIR']}/certs/ca.crt", str(_wrong_ca(tmp_path)))
    )
    record = regs.with_suffix(".record.json")

    failed = tested.run("--registries", str(wrong), "publish", REF, "--record", str(record))
    status = tested.run("--registries", str(regs), "status", REF, "--record", str(record))
    checked = tested.run("--registries", str(regs), "verify", REF, "--record", str(record))

    assert failed.returncode == 7, failed.stderr
    assert "TLS verification failed" in failed.stdout + failed.stderr
    assert record.read_text() == good  # the complete record is kept byte for byte
    attempt = json.loads(record.with_name(record.stem + ".attempt.json").read_text())
    assert attempt["complete"] is False
    assert attempt["endpoints"][0]["status"] == "failed"
    assert status.returncode == 0, status.stdout + status.stderr
    assert checked.returncode == 0, checked.stderr


def test_a_wrong_ca_file_is_exit_7_in_the_dry_run_as_in_the_real_run(
    tested: Cli, tmp_path: Path, namespace: str
) -> None:
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    regs.write_text(
        regs.read_text().replace(f"{os.environ['XPU_STACK_DIR']}/certs/ca.crt", str(_wrong_ca(tmp_path)))
    )

    dry = tested.run("--registries", str(regs), "release", REF, "--dry-run", "--json")
    real = publish(tested, regs)

    assert real.returncode == 7, real.stderr
    assert dry.returncode == 7, dry.stderr
    assert "TLS verification failed" in json.loads(dry.stdout)["failed"]["error"]


def _start_publish(cli: Cli, regs: Path, record: Path, cache: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "xpu_release", "--root", str(cli.root), "--registries", str(regs),
         "publish", REF, "--record", str(record)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**cli.env, "XPU_RELEASE_CACHE": str(cache)},
    )  # fmt: skip


ROUNDS = int(os.environ.get("XPU_TEST_RACE_ROUNDS", "2"))


def test_three_publishes_of_one_release_at_once_all_succeed_round_after_round(
    tested: Cli, tmp_path: Path
) -> None:
    # A CI retry beside the first run, and a third runner: three publishes of the same release
    # into the same (new, empty) repositories, started together. Two share one cold cache (one
    # runner), the third has its own (another runner). The race showed in about one round of
    # three before the fix, so the rounds repeat; each round has new repositories and new caches.
    tested_cache = tmp_path / "tested-cache"
    tested.run("test", REF, env={"XPU_RELEASE_CACHE": str(tested_cache)}, check=True)
    failures: list[str] = []
    digests: set[str] = set()
    for n in range(ROUNDS):
        regs = registries_file(tmp_path / f"round{n}.yaml", f"r{n}" + uuid.uuid4().hex[:8])
        shared, own = tmp_path / f"shared{n}", tmp_path / f"own{n}"
        for cache in (shared, own):
            shutil.copytree(tested_cache, cache)  # the smoke-test marker, no blob
        procs = [
            _start_publish(tested, regs, tmp_path / f"round{n}-{i}.record.json", cache)
            for i, cache in enumerate((shared, shared, own))
        ]
        for i, p in enumerate(procs):
            _, err = p.communicate(timeout=600)
            if p.returncode != 0:
                failures.append(f"round {n}, run {i}: exit {p.returncode}\n{err[-1500:]}")
        if failures:
            break
        for i in range(3):
            record = json.loads((tmp_path / f"round{n}-{i}.record.json").read_text())
            assert record["complete"] is True
            digests.add(str(record["digest"]))
        assert set(served(tested, regs, "1.0").values()) <= digests
        assert tested.run("--registries", str(regs), "verify", REF, "--record",
                          str(tmp_path / f"round{n}-0.record.json")).returncode == 0  # fmt: skip

    assert not failures, "\n".join(failures)
    assert len(digests) == 1
    for cache in tmp_path.glob("shared*"):
        assert not list((cache / "oci-blobs").glob("*.partial"))
