"""`watch` at scale (issue #39; a script, not a timed test): every published release of a
repository re-read from its registry and re-scanned against an advisory archive of osv.dev's
shape, the way the scheduled job runs it.

    python bench/watch.py [--families 20] [--versions 12] [--records 60000] [--sbom FILE] [--repeat 3]

Made in a temporary folder (nothing committed), with a registry of its own (Debian's
`docker-registry` on a free loopback port, no engine needed):
  releases   families x versions (default 240) of a small image (the integration fixture's shape:
             its base by tag from the hub), each version extending the one before with one pin
             moved, each with its committed lock (the base pinned by digest);
  published  each release's image manifest at its version tag, and its CycloneDX SBOM attached
             by digest as publish attaches it (the referrers tag schema: distribution 2.8); the
             SBOM is training-cpu-pytorch's shape (its lock's pins plus 450 Debian packages,
             as bench/scan.py makes it) or --sbom FILE (e.g. `xpu-release sbom REF`);
  advisories PyPI/all.zip and Debian/all.zip with --records records in all, every package of the
             SBOM given records (half of them affecting it), as bench/scan.py makes them.

Measured, each in a fresh process: `watch --json` cold (the archives indexed once, keyed by
their sha256) and warm (what every scheduled run pays), median of --repeat. Goal: warm under
10 s at 240 releases. With --latency MS, warm runs also go through a proxy that holds every
request MS milliseconds (a registry across a network, not on loopback), `--jobs 0` (one request
at a time) and the default read-ahead interleaved, --repeat rounds of each. Prints a table and
writes bench/results/watch.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))
GOAL_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_registry(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    import requests

    port = free_port()
    conf = folder / "registry.yml"
    conf.write_text(
        "version: 0.1\nlog: {level: error, accesslog: {disabled: true}}\n"
        f"storage: {{filesystem: {{rootdirectory: {folder}/data}}, delete: {{enabled: true}}}}\n"
        f"http: {{addr: '127.0.0.1:{port}'}}\n"
    )
    proc = subprocess.Popen(["docker-registry", "serve", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    host = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            requests.get(f"http://{host}/v2/", timeout=1)
            return proc, host
        except requests.RequestException:
            if time.monotonic() > deadline:
                proc.kill()
                raise
            time.sleep(0.1)


def make_repo(dst: Path, families: int, versions: int) -> list[str]:
    """A repository of ``families`` x ``versions`` releases of the fixture's shape; its refs."""
    for name in ("templates", "schema"):
        shutil.copytree(ROOT / name, dst / name)
    shutil.copy(ROOT / "registries.yaml", dst / "registries.yaml")
    first = (
        ROOT / "tests" / "integration" / "fixture" / "manifests" / "xpu-fixture" / "1.0.yaml"
    ).read_text()
    first = first.replace("{artifact_url}", "https://artifacts.example.invalid/blob.tar.gz")
    first = first.replace("{artifact_sha256}", "a" * 64)
    refs = []
    for f in range(families):
        image = f"bench-{f:02d}"
        (dst / "manifests" / image).mkdir(parents=True)
        (dst / "images" / image).mkdir(parents=True)
        (dst / "images" / image / "image.yaml").write_text("template: Dockerfile.j2\n")
        (dst / "manifests" / image / "1.0.yaml").write_text(
            first.replace("image: xpu-fixture", f"image: {image}").replace("xpu-fixture 1.0", f"{image} 1.0")
        )
        refs.append(f"{image}:1.0")
        for r in range(1, versions):
            (dst / "manifests" / image / f"1.{r}.yaml").write_text(
                f'image: {image}\nversion: "1.{r}"\nextends: "1.{r - 1 if r > 1 else 0}"\n'
                f'components:\n  six: {{version: "1.16.{r}"}}\nrelease: {{}}\n'
            )
            refs.append(f"{image}:1.{r}")
    return refs


def publish_all(root: Path, regs: Path, host: str, refs: list[str], sbom: bytes, work: Path) -> str:
    """Each release's image at its version tag with its SBOM attached; the base at the hub's tag.
    Returns the base's digest (every lock pins it)."""
    from xpu_release.evidence.attachment import Attachment
    from xpu_release.evidence.referrers import attach
    from xpu_release.image.lock import Lock, lock_path, pins_sha256
    from xpu_release.manifest import Repo
    from xpu_release.manifest.registries import load_registries
    from xpu_release.oci.registry import OCI_MANIFEST, Manifest, RegistryClient
    from xpu_release.oci.store import canonical_json, sha256_digest

    registries = load_registries(root, str(regs))
    public = registries.endpoint("public")
    client = RegistryClient(public, None)
    layer = b"bench layer\n"
    blob = work / "blob"
    blob.write_bytes(layer)

    def push_image(repo: str, tag: str, label: str) -> Manifest:
        rootfs = {"type": "layers", "diff_ids": [sha256_digest(layer)]}
        config = canonical_json({"architecture": "amd64", "os": "linux", "config": {"Labels": {"x": label}},
                                 "rootfs": rootfs})  # fmt: skip
        (work / "config").write_bytes(config)
        client.upload_blob(repo, sha256_digest(config), work / "config")
        client.upload_blob(repo, sha256_digest(layer), blob)
        body = canonical_json({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "size": len(config),
                       "digest": sha256_digest(config)},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "size": len(layer),
                        "digest": sha256_digest(layer)}]})  # fmt: skip
        manifest = Manifest(digest=sha256_digest(body), media_type=OCI_MANIFEST, body=body)
        client.put_manifest(repo, tag, manifest)
        return manifest

    hub = registries.endpoint("hub")
    base = push_image(hub.repository("debian/bookworm-python"), "12", "base")
    repo = Repo(root)
    for ref in refs:
        spec = repo.load_ref(ref)
        lock = Lock(pins_sha256=pins_sha256(spec), layers=(), base=f"debian/bookworm-python:12@{base.digest}")
        path = lock_path(root, spec)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(lock.render(spec))
        image = push_image(public.repository(spec.image), spec.version, ref)
        attach(client, public.repository(spec.image), image, [Attachment(kind="sbom", payload=sbom)],
               created="2026-12-01T00:00:00Z", spool=work)  # fmt: skip
    return base.digest


def start_delay_proxy(target: str, delay: float) -> str:
    """A TCP proxy to ``target`` that holds each chunk a client sends ``delay`` seconds (each
    request waits a round trip); its address. Its threads end with the process."""
    import threading

    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    host, port = target.rsplit(":", 1)

    def pipe(src: socket.socket, dst: socket.socket, hold: float) -> None:
        try:
            while data := src.recv(1 << 16):
                if hold:
                    time.sleep(hold)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def accept() -> None:
        while True:
            client, _ = server.accept()
            upstream = socket.create_connection((host, int(port)))
            for args in ((client, upstream, delay), (upstream, client, 0.0)):
                threading.Thread(target=pipe, args=args, daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return f"127.0.0.1:{server.getsockname()[1]}"


def registries_file(path: Path, host: str) -> Path:
    path.write_text(
        f"registries:\n  public: {{host: '{host}', namespace: bench, insecure: true}}\n"
        "  vpc:\n    namespace: bench\n    insecure: true\n    regions: [r1]\n"
        f"    hosts: {{r1: '{host}'}}\n"
        f"  hub: {{host: '{host}', namespace: base, insecure: true}}\n"
    )
    return path


def watch(root: Path, regs: Path, corpus: Path, cache: Path, *extra: str) -> tuple[float, dict[str, object]]:
    env = {**os.environ, "XPU_RELEASE_CACHE": str(cache)}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "xpu_release", "--root", str(root), "--registries", str(regs), "watch",
         "--advisories", str(corpus), "--json", *extra], capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    seconds = time.monotonic() - started
    if proc.returncode not in (0, 15):
        sys.exit(f"watch exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return seconds, json.loads(proc.stdout)


def main() -> None:
    from bench.scan import make_corpus, synthetic_sbom

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--families", type=int, default=20)
    parser.add_argument("--versions", type=int, default=12)
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--sbom", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.0, help="milliseconds each request is held")
    args = parser.parse_args()
    if args.sbom:
        sbom, what = args.sbom.read_bytes(), str(args.sbom)
    else:
        bare, what = synthetic_sbom()
        sbom = json.dumps({"bomFormat": "CycloneDX", "specVersion": "1.6", **json.loads(bare)}).encode()
    with tempfile.TemporaryDirectory(prefix="xpu-bench-watch-") as tmp_name:
        tmp = Path(tmp_name)
        registry, host = start_registry(tmp)
        try:
            regs = registries_file(tmp / "regs.yaml", host)
            root = tmp / "repo"
            refs = make_repo(root, args.families, args.versions)
            started = time.monotonic()
            publish_all(root, regs, host, refs, sbom, tmp)
            made = time.monotonic() - started
            sizes = make_corpus(tmp / "osv", args.records, sbom)
            cold, answer = watch(root, regs, tmp / "osv", tmp / "cache")
            warm = [watch(root, regs, tmp / "osv", tmp / "cache")[0] for _ in range(args.repeat)]
            far: dict[str, list[float]] = {"--jobs 0": [], "read-ahead": []}
            if args.latency:
                slow = registries_file(tmp / "far.yaml", start_delay_proxy(host, args.latency / 1000))
                for _ in range(args.repeat):  # interleaved: a slow spell of the machine falls on both
                    far["--jobs 0"].append(watch(root, slow, tmp / "osv", tmp / "cache", "--jobs", "0")[0])
                    far["read-ahead"].append(watch(root, slow, tmp / "osv", tmp / "cache")[0])
        finally:
            registry.send_signal(signal.SIGTERM)
            registry.wait()
    states = Counter(str(r.get("state")) for r in answer.get("releases", []))
    median = statistics.median(warm)
    verdict = "met" if median < GOAL_S else "NOT met"
    archives = ", ".join(f"{k} {v / 1e6:.0f} MB" for k, v in sizes.items())
    rows = [
        ("releases published (manifest, SBOM referrer, tag)", f"{len(refs)}", f"made in {made:.1f} s"),
        ("advisory records", f"{args.records:,}", archives),
        ("watch, cold (archives indexed once)", f"{cold:.2f} s", ""),
        ("watch, warm (median)", f"{median:.2f} s", f"goal under {GOAL_S:.0f} s: {verdict}"),
        ("states", ", ".join(f"{k} {v}" for k, v in sorted(states.items())), ""),
    ]
    for name, runs in far.items():
        if runs:
            rows.append((f"warm, {args.latency:g} ms a request, {name}", f"{statistics.median(runs):.2f} s",
                         f"median of {len(runs)}, range {min(runs):.1f}-{max(runs):.1f} s"))  # fmt: skip
    print(f"\nwatch over {len(refs)} published releases (SBOM: {what})\n")
    for name, value, note in rows:
        print(f"  {name:<52} {value:>14}  {note}")
    result = {"releases": len(refs), "records": args.records, "archive_bytes": sizes, "sbom": what,
              "cold_s": cold, "warm_s": warm, "warm_median_s": median, "goal_s": GOAL_S,
              "states": dict(states), "made_s": made, "latency_ms": args.latency,
              "far_s": far}  # fmt: skip
    out = ROOT / "bench" / "results" / "watch.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
