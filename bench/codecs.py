"""Layer-codec benchmark (a script, not a timed test): which codec should compress the layers
our first push makes, measured on real layer content.

    python bench/codecs.py [--sample-mb 512] [--endpoints 4] [--wheel FILE]

The sample is the content of the torch 2.13.0+cpu wheel (the training image's biggest layer:
its shared libraries and Python files) written as an uncompressed tar, cut to ``--sample-mb``.
Every codec compresses it exactly as the push does (``oci.members.compress``: 32 MiB members on
two threads, the machine's two cores), in a process of its own, three times (median).

Reported per codec: MB/s of layer in (wall, both cores), CPU seconds, compressed / raw, and
the seconds to compress plus send a 25 GB layer's blob to ``--endpoints`` endpoints at a few
uplink speeds, under a simple model: the runner's uplink carries every endpoint's copy
(publish sends each blob to each endpoint), and compressing and sending do not overlap (an upper
bound; the push overlaps them per layer). The crossover is the uplink speed below which the
codec's smaller blob pays for its slower compression against the default (ISA-L level 2).
The row ``estargz`` is ISA-L level 2 written as eStargz (``oci.estargzwrite.write``: a gzip member per
file and per 4 MiB chunk, the TOC, on two threads), on the same content as a whole tar (``--codecs
isal:2,estargz`` measures only those two). Prints a table and writes bench/results/codecs.json.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CODECS = ["isal:0", "isal:1", "isal:2", "isal:3", "zlib-ng:1", "zlib-ng:2", "zlib-ng:6", "zlib:1", "zlib:6",
          "zstd:1", "zstd:3"]  # fmt: skip
DEFAULT = "isal:2"
LINKS_MBIT = [100, 1000, 10000]  # the runner's uplink, Mbit/s
IMAGE_GB = 25

_ONE = """
import json, resource, sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
sys.path.insert(0, {src!r})
from xpu_release.oci.codec import parse_codec
from xpu_release.oci.members import compress
codec = parse_codec({name!r}, accept_zstd=True, where="bench")
spool = Path({spool!r})
t0, c0 = time.perf_counter(), time.process_time()
with ThreadPoolExecutor(max_workers=2) as pool:
    blob = compress(Path({sample!r}), spool, pool, codec)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
(spool / blob.digest.replace(":", "-")).unlink()
print(json.dumps({{"wall": wall, "cpu": cpu, "size": blob.size, "digest": blob.digest,
                  "key": codec.key}}))
"""


_ESTARGZ = """
import json, os, sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
sys.path.insert(0, {src!r})
from xpu_release.oci import estargzwrite
from xpu_release.oci.codec import DEFAULT
blob = Path({spool!r}) / "estargz.blob"
t0, c0 = time.perf_counter(), time.process_time()
with open({sample!r}, "rb") as src, open(os.devnull, "wb") as tar, blob.open("wb") as out, \\
        ThreadPoolExecutor(max_workers=2) as pool:
    made = estargzwrite.write(src, tar, out, codec=DEFAULT, pool=pool)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
blob.unlink()
print(json.dumps({{"wall": wall, "cpu": cpu, "size": made.blob_size, "digest": made.blob_digest,
                  "key": "estargz-" + DEFAULT.key}}))
"""


def find_wheel() -> Path:
    for folder in (Path("/opt/wheels"), Path.home() / ".cache" / "xpu-release" / "blobs"):
        found = sorted(folder.rglob("torch-2.13.0+cpu-*.whl")) if folder.is_dir() else []
        if found:
            return found[0]
    sys.exit("no torch-2.13.0+cpu wheel in /opt/wheels or the fetch cache: pass --wheel FILE")


def make_sample(wheel: Path, out: Path, limit: int, *, whole: bool = False) -> int:
    """The wheel's files as an uncompressed tar (what the layer holds), cut to ``limit`` bytes
    (``whole``: the tar of the files up to that size, ended as a tar is, for eStargz)."""
    with (
        zipfile.ZipFile(wheel) as z,
        out.open("wb") as raw,
        tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for info in z.infolist():
            if info.is_dir():
                continue
            data = z.read(info)
            member = tarfile.TarInfo(info.filename)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
            if raw.tell() >= limit:
                break
    if not whole:
        with out.open("r+b") as f:
            f.truncate(min(limit, out.stat().st_size))
    return out.stat().st_size


def seconds(mb_s_in: float, ratio: float, endpoints: int, mbit: float) -> float:
    """Compress and send a ``IMAGE_GB`` layer's blob to every endpoint over one uplink."""
    raw_mb = IMAGE_GB * 1000.0
    return raw_mb / mb_s_in + endpoints * raw_mb * ratio / (mbit / 8)


def against(r: dict[str, Any], base: dict[str, Any], endpoints: int) -> str:
    """When ``r`` beats the default: the uplink speed (Mbit/s) at which both take as long."""
    if r is base:
        return "(the default)"
    dt = 1 / r["mb_s_in"] - 1 / base["mb_s_in"]  # seconds more per raw MB to compress
    dbytes = endpoints * (base["ratio"] - r["ratio"])  # MB fewer to send per raw MB
    if dt <= 0 and dbytes >= 0:
        return "always"
    if dt >= 0 and dbytes <= 0:
        return "never"
    mbit = 8 * dbytes / dt
    return f"below {mbit:.0f} Mb/s" if dt > 0 else f"above {mbit:.0f} Mb/s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sample-mb", type=int, default=512)
    ap.add_argument("--endpoints", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--wheel", type=Path)
    ap.add_argument("--codecs", default=",".join([*CODECS, "estargz"]), help="which rows, comma-separated")
    args = ap.parse_args()
    wheel = args.wheel or find_wheel()
    rows = []
    with tempfile.TemporaryDirectory(prefix="xpu-bench-codecs-") as tmp:
        sample = Path(tmp) / "layer.tar"
        size = make_sample(wheel, sample, args.sample_mb << 20, whole=True)
        for name in args.codecs.split(","):
            runs = []
            for _ in range(args.runs):
                snippet = _ESTARGZ if name == "estargz" else _ONE
                code = snippet.format(src=str(ROOT / "src"), name=name, spool=tmp, sample=str(sample))
                out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
                runs.append(json.loads(out.stdout))
            assert len({r["digest"] for r in runs}) == 1, f"{name}: the same layer gave different blobs"
            wall = statistics.median(r["wall"] for r in runs)
            cpu = statistics.median(r["cpu"] for r in runs)
            ratio = runs[0]["size"] / size
            rows.append({"codec": name, "key": runs[0]["key"], "mb_s_in": size / wall / 1e6,
                         "cpu_s": cpu, "ratio": ratio, "blob_digest": runs[0]["digest"],
                         "deterministic_runs": args.runs})  # fmt: skip
    base = next((r for r in rows if r["codec"] == DEFAULT), rows[0])
    for r in rows:
        r["seconds_25gb"] = {str(m): seconds(r["mb_s_in"], r["ratio"], args.endpoints, m) for m in LINKS_MBIT}
        r["against_default"] = against(r, base, args.endpoints)
    head = (
        f"{'codec':10} {'MB/s in':>8} {'CPU s':>7} {'ratio':>6} "
        + " ".join(f"{f'{IMAGE_GB}GB@{m}Mb':>12}" for m in LINKS_MBIT)
        + f" {'beats the default':>20}"
    )
    print(f"sample: {size / 1e6:.0f} MB of {wheel.name}'s content; {args.endpoints} endpoints; "
          f"median of {args.runs}, two threads; seconds to compress + send {IMAGE_GB} GB raw")  # fmt: skip
    print(head)
    for r in rows:
        cross = r["against_default"]
        cells = " ".join(f"{r['seconds_25gb'][str(m)]:12.0f}" for m in LINKS_MBIT)
        print(f"{r['codec']:10} {r['mb_s_in']:8.0f} {r['cpu_s']:7.2f} {r['ratio']:6.3f} {cells} {cross:>20}")
    report = {"sample_bytes": size, "wheel": wheel.name, "endpoints": args.endpoints, "runs": args.runs,
              "cpus": os.cpu_count(), "default": DEFAULT, "image_gb": IMAGE_GB, "links_mbit": LINKS_MBIT,
              "codecs": rows}  # fmt: skip
    chosen = args.codecs.split(",")
    name = (
        "codecs"
        if chosen == [*CODECS, "estargz"]
        else "codecs-" + "-".join(c.replace(":", "") for c in chosen)
    )
    out = ROOT / "bench" / "results" / f"{name}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
