"""Build benchmark on the CPU family, side by side in one run (a script, not a timed test).

    ci/release-local.sh && eval "$(ci/local-stack.sh env)" && python bench/build.py

training-cpu-pytorch builds on the pytorch-cpu-sdk release, which must be published on the
stack (ci/release-local.sh does). Measures: a cold build (no engine cache but the base; the host
wheel cache stays warm, as on a CI runner that keeps it), a rebuild with no change, the
content-addressed skip, a rebuild after bumping one pin (accelerate), and the bytes wasted
across layers (files a later layer overwrites or deletes). Then, against a namespace of its own
on the local stack: a release of 25.03, a rerun of that release on a fresh runner (no image, no
cache: the build stage pulls the published image instead of building), and the upgrade's
compressed bytes that 25.03 did not already have at the public endpoint. Prints a table and
writes bench/results/build.json.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SDK = "pytorch-cpu-sdk:2.13.0"
REF = "training-cpu-pytorch:25.03"
BUMPED = "training-cpu-pytorch:99.01"
GOALS = {
    "rebuild_no_change": 0.05,
    "rebuild_last_pin": 0.10,
    "wasted_fraction": 0.01,
    "fresh_rerun_build": 0.3,
    "upgrade_shipped": 0.05,
}


def cli(root: Path, *args: str, env: dict[str, str] | None = None) -> float:
    return run(root, *args, env=env)[0]


def run(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    import os

    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "xpu_release", "--root", str(root), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if proc.returncode != 0:
        sys.exit(f"xpu-release {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return time.monotonic() - started, proc.stdout


def bench_registries(path: Path) -> Path:
    """The stack's registries, under a namespace of this run's own."""
    import os
    import uuid

    stack = os.environ["XPU_STACK_DIR"]
    ns = "bench" + uuid.uuid4().hex[:8]
    path.write_text(
        "registries:\n"
        f"  public: {{host: '127.0.0.1:15001', namespace: {ns}, ca_file: {stack}/certs/ca.crt}}\n"
        f"  vpc:\n    namespace: {ns}\n    insecure: true\n"
        "    regions: [cn-beijing, cn-wulanchabu, cn-shanghai]\n"
        "    hosts: {cn-beijing: '127.0.0.1:15002', cn-wulanchabu: '127.0.0.1:15003', "
        "cn-shanghai: '127.0.0.1:15004'}\n"
        "  hub: {host: '127.0.0.1:15000', namespace: base, insecure: true}\n"
    )
    return path


def public_layers(root: Path, regs: Path, tag: str) -> dict[str, int]:
    sys.path.insert(0, str(ROOT / "src"))
    import os

    from xpu_release.manifest.registries import load_registries
    from xpu_release.oci.credentials import CredentialStore
    from xpu_release.oci.registry import RegistryClient
    from xpu_release.settings import Settings

    ep = load_registries(root, str(regs)).publish_endpoints()[0]
    store = CredentialStore.from_settings(Settings.from_env(os.environ), release_hosts=frozenset({ep.host}))
    manifest = RegistryClient(ep, store.for_host(ep.host)).get_manifest(
        ep.repository("training-cpu-pytorch"), tag
    )
    assert manifest is not None
    return {layer.digest: layer.size for layer in manifest.layers}


def wasted_bytes(ref: str) -> tuple[int, int]:
    """(total bytes of all layers, bytes of files a later layer overwrites or deletes)."""
    import docker

    client = docker.from_env(version="auto", timeout=900)
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "image.tar"
        with archive.open("wb") as f:
            for chunk in client.api.get_image(ref):
                f.write(chunk)
        with tarfile.open(archive) as outer:
            manifest = json.load(outer.extractfile("manifest.json"))  # type: ignore[arg-type]
            seen: dict[str, int] = {}
            total = wasted = 0
            for layer_name in manifest[0]["Layers"]:
                with tarfile.open(fileobj=outer.extractfile(layer_name)) as layer:
                    for member in layer:
                        path = "/" + member.name.lstrip("./")
                        base = path.rsplit("/", 1)
                        if base[-1].startswith(".wh."):
                            victim = base[0] + "/" + base[-1][4:]
                            for p in [p for p in seen if p == victim or p.startswith(victim + "/")]:
                                wasted += seen.pop(p)
                            continue
                        if member.isfile():
                            total += member.size
                            if path in seen:
                                wasted += seen[path]
                            seen[path] = member.size
    return total, wasted


def main() -> None:
    import docker

    client = docker.from_env(version="auto", timeout=900)
    results: dict[str, Any] = {"image": REF}
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        for name in ("manifests", "templates", "images", "schema", "tests"):
            shutil.copytree(ROOT / name, repo / name)
        shutil.copy(ROOT / "registries.yaml", repo)

        # Cold: no image and no build cache; the base stays (the SDK release training-cpu-pytorch
        # builds on, and the Debian root under it: they come from registries).
        def forget_everything_but_the_base() -> None:
            for container in client.containers.list(all=True):
                container.remove(force=True)
            for image in client.images.list():
                names = [*image.tags, *image.attrs.get("RepoDigests", [])]
                if not any("bookworm-python" in n or "pytorch-cpu-sdk" in n for n in names):
                    client.images.remove(image.id, force=True)

        cli(repo, "build", REF)  # warm the host's wheel cache outside the measured runs
        forget_everything_but_the_base()
        results["cold_s"] = cli(repo, "build", REF)
        results["rebuild_no_change_s"] = cli(repo, "build", REF, "--rebuild")
        results["skip_s"] = cli(repo, "build", REF)
        # Size and waste of 25.03 while the engine holds it (the fresh-runner runs below empty it).
        size = client.api.inspect_image(REF)["Size"]
        total, wasted = wasted_bytes(REF)
        results.update(image_bytes=size, layer_file_bytes=total, wasted_bytes=wasted)
        print(json.dumps(results), file=sys.stderr, flush=True)

        # Bump one pin (accelerate) in a new release that extends 25.03.
        (repo / "manifests" / "training-cpu-pytorch" / "99.01.yaml").write_text(
            'image: training-cpu-pytorch\nversion: "99.01"\nextends: "25.03"\n'
            "components:\n  accelerate: {version: 1.6.0}\n"
        )
        cli(repo, "render", BUMPED)
        cli(repo, "lock", BUMPED)
        results["rebuild_last_pin_s"] = cli(repo, "build", BUMPED)
        print(json.dumps(results), file=sys.stderr, flush=True)

        # Publish 25.03, then rerun its release as a fresh runner would: nothing in the engine
        # but the base, an empty xpu-release cache.
        regs = bench_registries(Path(tmp) / "regs.yaml")
        cli(repo, "--registries", str(regs), "release", SDK)  # the base, where this namespace serves it
        results["release_s"] = cli(repo, "--registries", str(regs), "release", REF)
        forget_everything_but_the_base()
        fresh = {"XPU_RELEASE_CACHE": str(Path(tmp) / "fresh-cache")}
        seconds, out = run(repo, "--registries", str(regs), "release", REF, "--json", env=fresh)
        stages = {s["name"]: s for s in json.loads(out)["stages"]}
        assert stages["build"]["status"] == "pulled", stages["build"]
        results["fresh_rerun_s"] = seconds
        results["fresh_rerun_build_s"] = stages["build"]["seconds"]
        results["fresh_rerun_test_s"] = stages["test"]["seconds"]

        # The upgrade, built on a fresh runner too, then published after 25.03.
        forget_everything_but_the_base()
        fresh = {"XPU_RELEASE_CACHE": str(Path(tmp) / "fresh-cache-2")}
        cli(repo, "build", BUMPED, "--no-cache", env=fresh)
        cli(repo, "--registries", str(regs), "release", BUMPED, env=fresh)
        old, new = public_layers(repo, regs, "25.03"), public_layers(repo, regs, "99.01")
        results["upgrade_bytes"] = sum(new.values())
        results["upgrade_shipped_bytes"] = sum(size for d, size in new.items() if d not in old)

    cold = results["cold_s"]
    rows = [
        ("cold build", f"{cold:.1f} s", "100 %", ""),
        (
            "rebuild, no change",
            f"{results['rebuild_no_change_s']:.1f} s",
            f"{100 * results['rebuild_no_change_s'] / cold:.1f} %",
            "≤ 5 %",
        ),
        (
            "build, same inputs (skip)",
            f"{results['skip_s']:.1f} s",
            f"{100 * results['skip_s'] / cold:.1f} %",
            "",
        ),
        (
            "rebuild, one pin bumped",
            f"{results['rebuild_last_pin_s']:.1f} s",
            f"{100 * results['rebuild_last_pin_s'] / cold:.1f} %",
            "≤ 10 %",
        ),
        (
            "fresh-runner rerun: build",
            f"{results['fresh_rerun_build_s']:.1f} s",
            f"{100 * results['fresh_rerun_build_s'] / cold:.1f} %",
            "≤ 30 %",
        ),
        ("fresh-runner rerun: release", f"{results['fresh_rerun_s']:.1f} s", "", ""),
        ("  of which smoke test", f"{results['fresh_rerun_test_s']:.1f} s", "", ""),
        ("release, first time", f"{results['release_s']:.1f} s", "", ""),
        (
            "upgrade: bytes shipped",
            f"{results['upgrade_shipped_bytes'] / 1e6:.1f} MB",
            f"{100 * results['upgrade_shipped_bytes'] / max(results['upgrade_bytes'], 1):.2f} %",
            "≤ 5 %",
        ),
        ("image size", f"{size / 1e6:.0f} MB", "", ""),
        ("wasted across layers", f"{wasted / 1e6:.2f} MB", f"{100 * wasted / max(total, 1):.2f} %", "≤ 1 %"),
    ]
    results["ratios"] = {
        "rebuild_no_change": results["rebuild_no_change_s"] / cold,
        "rebuild_last_pin": results["rebuild_last_pin_s"] / cold,
        "wasted_fraction": wasted / max(total, 1),
        "fresh_rerun_build": results["fresh_rerun_build_s"] / cold,
        "upgrade_shipped": results["upgrade_shipped_bytes"] / max(results["upgrade_bytes"], 1),
    }
    results["goals_met"] = {k: results["ratios"][k] <= v for k, v in GOALS.items()}
    print(f"{'measure':<30} {'value':>10} {'of cold':>9} {'goal':>7}")
    for name, value, share, goal in rows:
        print(f"{name:<30} {value:>10} {share:>9} {goal:>7}")
    out = ROOT / "bench" / "results" / "build.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
