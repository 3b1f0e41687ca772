"""A rebuild reads a changed layer from the stage that made it, not out of an export of the whole
image: which stage made which layer comes from the classic builder's log, checked against what
the engine says of the layer; the config comes from the engine's inspect and history answers."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

from xpu_release.image import layers
from xpu_release.image.normalize import config_bytes, content_sizes, engine_config, normalized_config
from xpu_release.image.stages import BuildLog, content_size, layer_stages, read_log

from .test_reproducible import EPOCH, RAW_CONFIG

# What docker 20.10's classic builder printed for a build of training-cpu-pytorch (abridged:
# the pip stages' steps and a cached one).
LOG = """\
Step 1/24 : ARG BASE_IMAGE=registry.example/pytorch-cpu-sdk:2.13.0
Step 2/24 : FROM ${BASE_IMAGE} AS base
 ---> 6f43c10591ef
Step 3/24 : SHELL ["/bin/sh", "-eu", "-c"]
 ---> Using cache
 ---> 96b82705cc89
Step 4/24 : FROM base AS system
 ---> 96b82705cc89
Step 5/24 : RUN /usr/bin/python3 -m venv --system-site-packages /opt/venv
 ---> Running in 0c1d2e3f4a5b
Removing intermediate container 0c1d2e3f4a5b
 ---> ea5b039a2e35
Step 6/24 : FROM system AS pip-ray
 ---> ea5b039a2e35
Step 7/24 : COPY wheels/ray/ /tmp/wheels/
 ---> 8dff0e1a7413
Step 8/24 : RUN /opt/venv/bin/pip install --root /out -r /tmp/wheels/requirements.txt
 ---> Running in 1a2b3c4d5e6f
Successfully installed ray-2.43.0
Removing intermediate container 1a2b3c4d5e6f
 ---> 96ff32e8a9b3
Step 9/24 : FROM system AS pip-accelerate
 ---> ea5b039a2e35
Step 10/24 : COPY wheels/accelerate/ /tmp/wheels/
 ---> bd5477f7b8b0
Step 11/24 : RUN /opt/venv/bin/pip install --root /out -r /tmp/wheels/requirements.txt
 ---> d635c4cb9e2a
Step 12/24 : FROM base AS constraints
 ---> 96b82705cc89
Step 13/24 : COPY pip-constraints.txt /out/etc/xpu-release/pip-constraints.txt
 ---> 4e5f6a7b8c9d
Step 14/24 : FROM system AS image
 ---> ea5b039a2e35
Step 15/24 : COPY --from=pip-ray /out/ /
 ---> 0ebefbd6335b
Step 16/24 : COPY --from=pip-accelerate /out/ /
 ---> f60de76c1348
Step 17/24 : COPY --from=constraints /out/ /
 ---> 3065ddabc1ca
Step 18/24 : ENV VIRTUAL_ENV=/opt/venv
 ---> Running in 30bc2dd7984e
Removing intermediate container 30bc2dd7984e
 ---> 1fcfaa47de79
Step 19/24 : LABEL org.opencontainers.image.version=25.03
 ---> 577c6b3d61e5
Successfully built 577c6b3d61e5
""".splitlines()

SYSTEM = ["sha256:" + "a" * 64, "sha256:" + "b" * 64]  # the base's layer and the venv's
RAY, ACCELERATE, CONSTRAINTS = ("sha256:" + c * 64 for c in "cde")


def test_the_log_names_each_stage_by_the_image_its_last_step_made() -> None:
    log = read_log(LOG)

    assert log.stages == {
        "base": "96b82705cc89",
        "system": "ea5b039a2e35",
        "pip-ray": "96ff32e8a9b3",
        "pip-accelerate": "d635c4cb9e2a",
        "constraints": "4e5f6a7b8c9d",
        "image": "577c6b3d61e5",
    }
    assert log.start == "ea5b039a2e35"  # what the last stage starts from: system
    assert log.steps[:3] == (
        "COPY --from=pip-ray /out/ /",
        "COPY --from=pip-accelerate /out/ /",
        "COPY --from=constraints /out/ /",
    )


def test_each_layer_of_the_last_stage_is_the_out_of_the_stage_it_copies() -> None:
    diff_ids = [*SYSTEM, RAY, ACCELERATE, CONSTRAINTS]

    assert layer_stages(read_log(LOG), diff_ids, start_layers=2) == {
        RAY: "96ff32e8a9b3",
        ACCELERATE: "d635c4cb9e2a",
        CONSTRAINTS: "4e5f6a7b8c9d",
    }


def test_a_layer_that_is_not_a_stage_s_out_is_read_from_the_export() -> None:
    log = read_log(LOG)
    steps = ("COPY --from=pip-ray /out/ /", "RUN rm -rf /tmp/x", "COPY --from=registry.example/x /out/ /")
    other = BuildLog(stages=log.stages, start=log.start, steps=steps)

    # Only the first layer is some stage's /out; a RUN, or a copy from an image that is no
    # stage of the build, is not.
    assert layer_stages(other, [*SYSTEM, RAY, "sha256:" + "f" * 64, ACCELERATE], 2) == {RAY: "96ff32e8a9b3"}


def test_steps_that_do_not_account_for_the_layers_attribute_none() -> None:
    # One layer more than the steps make (a builder that printed something else): nothing is
    # attributed by position, every layer is read from the export.
    assert layer_stages(read_log(LOG), [*SYSTEM, RAY, ACCELERATE, CONSTRAINTS, "sha256:" + "f" * 64], 2) == {}
    assert layer_stages(read_log(LOG), [*SYSTEM, RAY, ACCELERATE, CONSTRAINTS], 3) == {}
    assert layer_stages(read_log(["Successfully built 577c6b3d61e5"]), [*SYSTEM], 2) == {}


def _inspect_and_history(
    config: dict[str, Any], sizes: list[int]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What the engine answers for an image of ``config`` (inspect, history oldest first), its
    layers of the given content sizes."""
    attrs = {
        "Id": "sha256:" + "9" * 64,
        "Architecture": config["architecture"],
        "Os": config["os"],
        "Config": config["config"],
        "RootFS": {"Type": "layers", "Layers": config["rootfs"]["diff_ids"]},
        "Created": config["created"],
        "DockerVersion": config["docker_version"],
    }
    sized = iter(sizes)
    history = [
        {"Created": 1, "CreatedBy": h.get("created_by", ""), "Comment": h.get("comment", ""),
         "Size": 0 if h.get("empty_layer") else next(sized), "Id": "<missing>", "Tags": None}
        for h in config["history"]
    ]  # fmt: skip
    return attrs, history


def test_the_engine_s_answers_give_the_config_the_export_gives() -> None:
    diffs = ["sha256:" + "00" * 32, "sha256:" + "22" * 32]
    attrs, history = _inspect_and_history(RAW_CONFIG, [4096, 669])

    from_engine = engine_config(attrs, history)

    assert from_engine is not None
    assert config_bytes(normalized_config(from_engine, diffs, EPOCH)) == config_bytes(
        normalized_config(RAW_CONFIG, diffs, EPOCH)
    )
    assert content_sizes(attrs, history) == {"sha256:" + "00" * 32: 4096, "sha256:" + "11" * 32: 669}


def test_a_layer_of_no_size_leaves_the_config_to_the_export() -> None:
    # A RUN that changed no file made a layer the history reports as 0 bytes, like an ENV: which
    # entries made layers cannot be told from the answers.
    attrs, history = _inspect_and_history(RAW_CONFIG, [4096, 0])

    assert engine_config(attrs, history) is None
    assert content_sizes(attrs, history) == {}


def _archive(path: Path, root: str, files: dict[str, bytes], links: dict[str, str]) -> Path:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        if root:
            top = tarfile.TarInfo(root.rstrip("/") or ".")
            top.type, top.mode, top.mtime = tarfile.DIRTYPE, 0o755, 1_900_000_000
            tar.addfile(top)
        for name in ("opt", "opt/venv"):
            info = tarfile.TarInfo(root + name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 1_900_000_000
            tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(root + name)
            info.size, info.mode, info.mtime = len(data), 0o644, 1_900_000_000
            tar.addfile(info, io.BytesIO(data))
        for name, target in links.items():
            info = tarfile.TarInfo(root + name)
            info.type, info.linkname, info.mtime = tarfile.SYMTYPE, target, 1_900_000_000
            tar.addfile(info)
            hard = tarfile.TarInfo(root + name + ".hard")
            hard.type, hard.linkname = tarfile.LNKTYPE, root + next(iter(files))
            tar.addfile(hard)
    return path


def test_a_stage_s_out_and_the_layer_that_copied_it_normalize_to_one_layer(tmp_path: Path) -> None:
    files = {"opt/venv/a.py": b"a = 1\n", "opt/venv/b.py": b"b = 22\n"}
    links = {"opt/venv/c": "a.py"}
    # The engine's archive of /out/. (a root entry, names under ./) and the layer of
    # COPY --from=stage /out/ / (names from the layer's root).
    out = _archive(tmp_path / "out.tar", "./", files, links)
    layer = _archive(tmp_path / "layer.tar", "", files, links)

    assert layers.normalize_layer(out, tmp_path / "a") == layers.normalize_layer(layer, tmp_path / "b")
    with tarfile.open(tmp_path / "a") as normalized:
        assert "." not in normalized.getnames()
    # What the engine reports as the layer's size: files and symbolic links, a hard link not again.
    assert content_size(out) == content_size(layer) == len(b"a = 1\n") + len(b"b = 22\n") + len("a.py")
