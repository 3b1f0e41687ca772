"""Structure-aware Hypothesis strategies for outside data: OCI descriptors, manifests and indexes
built field by field (each field a good value or a hostile one: a string where a map belongs, a
size of ``1e400``, ``true`` or 400 digits, a digest in capitals, nesting thousands deep), and
the plans of whole inputs the readers meet: an OCI layout (index, manifests, referrers, blobs,
links, FIFOs), a registry that lies, truncates, trickles or floods, advisories loose and zipped,
release records, and YAML. A plan is data (shown when an example fails); ``write_*`` makes it.

``EXAMPLES`` follows the loaded profile: a quarter of its budget (30 in CI, 750 with
``--hypothesis-profile=long``), so that deep runs go deep and CI stays quick."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hypothesis import strategies as st

from ...conftest import examples

EXAMPLES = examples(30)  # a quarter of the profile's default budget

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
REF_NAME = "org.opencontainers.image.ref.name"


@dataclass(frozen=True)
class Raw:
    """JSON text written as it is: what ``json.dumps`` cannot write (``1e400``, 400 digits)."""

    text: str


def dumps(value: Any) -> str:
    """JSON of ``value``, with ``Raw`` pieces written as they are."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(dumps(v) for v in value) + "]"
    return json.dumps(value)


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


hostile = SimpleNamespace(
    SIZES=[True, False, -1, 1.5, 11.0, "11", None, [], {}, 1 << 63, Raw("1e400"), Raw("9" * 400), Raw("1e2")],
    TEXT=["", "a\nb", "\x1b[2J", "\u202eevil", "x" * 5000, 7, None, [], {"a": 1}],
)

DEEP = st.integers(65, 5000).map(lambda n: Raw("[" * n + "]" * n))
SIZE = st.integers(0, 1 << 20) | st.sampled_from(hostile.SIZES) | st.just(Raw("1" + "0" * 19))
DIGEST = st.sampled_from(["sha256:" + "a" * 64, "sha256:" + "0" * 64]) | st.sampled_from(
    ["sha256:" + "A" * 64, "sha256:abc", "md5:x", "", 7, None, "sha256:" + "a" * 64 + "\n"]
)
TEXT = st.text(max_size=12) | st.sampled_from(hostile.TEXT)
ANNOTATIONS = st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3) | st.sampled_from(
    ["a string", 7, [], {"k": 1}, {"k": None}, None]
)


def descriptors(*, good: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    """A descriptor: valid when ``good``; else any field may be missing or hostile."""
    if good:
        return st.fixed_dictionaries(
            {"mediaType": st.sampled_from([LAYER_TYPE, OCI_MANIFEST, CONFIG_TYPE]),
             "digest": st.binary(max_size=8).map(digest_of), "size": st.integers(0, (1 << 63) - 1)},
            optional={"annotations": st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
                      "artifactType": st.just("application/vnd.example+json")},
        )  # fmt: skip
    return st.fixed_dictionaries(
        {},
        optional={"mediaType": st.just(LAYER_TYPE) | TEXT, "digest": DIGEST, "size": SIZE,
                  "annotations": ANNOTATIONS, "artifactType": TEXT, "platform": st.just({"os": 1}) | TEXT},
    )  # fmt: skip


def _field(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(good, good, good, good, good, bad)  # mostly good: hostile fields one at a time


def fitted(image: Any, config: bytes, layer: bytes) -> Any:
    """``image`` with its config and first layer naming the blobs ``config`` and ``layer`` where
    they are descriptors (so that a copy gets past them to what else the plan holds), and no
    other layer; anything else as generated."""
    if not isinstance(image, dict):
        return image
    out = dict(image)
    if isinstance(out.get("config"), dict):
        out["config"] = {**out["config"], "digest": digest_of(config), "size": len(config)}
    if isinstance(out.get("layers"), list) and out["layers"] and isinstance(out["layers"][0], dict):
        out["layers"] = [{**out["layers"][0], "digest": digest_of(layer), "size": len(layer)}]
    return out


def manifest_values(subject: str | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """An image manifest's JSON value, each field good or (now and then) hostile."""
    good_subject = (
        st.just({"mediaType": OCI_MANIFEST, "digest": subject, "size": 2}) if subject else st.none()
    )
    return st.fixed_dictionaries({
        "schemaVersion": _field(st.just(2), st.sampled_from([1, "2", True, None])),
        "mediaType": _field(st.just(OCI_MANIFEST), TEXT),
        "config": _field(descriptors(good=True), descriptors() | TEXT),
        "layers": _field(st.lists(descriptors(good=True), max_size=3),
                         st.lists(descriptors(), max_size=3) | TEXT),
        "annotations": _field(st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=2),
                              ANNOTATIONS),
        "subject": _field(good_subject, TEXT | descriptors()),
    })  # fmt: skip


def index_values() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({
        "schemaVersion": _field(st.just(2), st.sampled_from([1, True])),
        "mediaType": _field(st.just(OCI_INDEX), TEXT),
        "manifests": _field(st.lists(descriptors(good=True), max_size=3),
                            st.lists(descriptors(), max_size=3) | TEXT | DEEP),
    })  # fmt: skip


def documents() -> st.SearchStrategy[bytes]:
    """The bytes of a manifest, an index, or something else entirely."""
    return st.one_of(
        manifest_values().map(lambda v: dumps(v).encode()),
        index_values().map(lambda v: dumps(v).encode()),
        DEEP.map(lambda r: r.text.encode()),
        st.binary(max_size=64),
        st.sampled_from([b"[]", b"null", b'"x"', b"{", b'{"manifests": "x"}', b"\xff\xfe{}"]),
    )


# --- an OCI layout -------------------------------------------------------------------------------


@dataclass
class LayoutPlan:
    """What a source layout holds: the image (its manifest value) at ``tag``, referrers of it,
    and what is done to its files (``damage``: a path in the layout and what it becomes)."""

    image: dict[str, Any]
    referrers: list[dict[str, Any]] = field(default_factory=list)
    index_extra: dict[str, Any] = field(default_factory=dict)  # top-level fields of index.json
    index_raw: str | None = None  # index.json's text as it is (None: written from the plan)
    damage: list[tuple[str, str]] = field(default_factory=list)


DAMAGE_SHAPES = ["fifo", "loop", "dangling", "directory", "empty", "truncated", "garbage", "link-out"]


def layout_plans(tag: str) -> st.SearchStrategy[LayoutPlan]:
    where = st.sampled_from(
        ["index.json", "oci-layout", "image", "config", "layer", "referrer", "blobs/sha256"]
    )
    return st.builds(
        LayoutPlan,
        image=manifest_values(),
        referrers=st.lists(manifest_values(subject="IMAGE"), max_size=2),
        index_extra=st.dictionaries(st.sampled_from(["annotations", "x-tool"]), st.just({"k": "v"}) | TEXT,
                                    max_size=1),
        index_raw=_field(st.none(), DEEP.map(lambda r: '{"manifests": ' + r.text + "}") | st.sampled_from(
            ['{"manifests": "x"}', "[]", "{", '{"manifests": [{"digest": 7}]}'])),
        damage=_field(st.just([]),
                      st.lists(st.tuples(where, st.sampled_from(DAMAGE_SHAPES)), min_size=1, max_size=2)),
    )  # fmt: skip


def _blob(root: Path, data: bytes) -> str:
    d = digest_of(data)
    (root / "blobs" / "sha256" / d[7:]).write_bytes(data)
    return d


def write_layout(root: Path, plan: LayoutPlan, tag: str, outside: Path) -> dict[str, Path]:
    """The layout ``plan`` says, at ``root``; returns where its named files are (for damage)."""
    (root / "blobs" / "sha256").mkdir(parents=True)
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    config, layer = b"{}", b"layer bytes"
    named = {"config": root / "blobs" / "sha256" / _blob(root, config)[7:],
             "layer": root / "blobs" / "sha256" / _blob(root, layer)[7:]}  # fmt: skip
    body = dumps(fitted(plan.image, config, layer)).encode()
    image_digest = _blob(root, body)
    named["image"] = root / "blobs" / "sha256" / image_digest[7:]
    entries: list[dict[str, Any]] = [{"mediaType": OCI_MANIFEST, "digest": image_digest, "size": len(body),
                                      "annotations": {REF_NAME: tag}}]  # fmt: skip
    for r in plan.referrers:
        text = dumps(r).replace('"IMAGE"', json.dumps(image_digest)).encode()
        d = _blob(root, text)
        named["referrer"] = root / "blobs" / "sha256" / d[7:]
        entries.append({"mediaType": OCI_MANIFEST, "digest": d, "size": len(text)})
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries, **plan.index_extra}
    (root / "index.json").write_text(plan.index_raw if plan.index_raw is not None else dumps(index))
    named["index.json"], named["oci-layout"] = root / "index.json", root / "oci-layout"
    named["blobs/sha256"] = root / "blobs" / "sha256"
    # the folder of blobs last: once it is a link, a file under it is no longer in the layout
    for what, shape in sorted(plan.damage, key=lambda d: d[0] == "blobs/sha256"):
        if what in named:
            damage(named[what], shape, outside)
    return named


def damage(path: Path, shape: str, outside: Path) -> None:
    """``path`` made into ``shape``: a FIFO, a link loop or to nothing, a directory, empty,
    cut short, garbage, or a link to a folder outside the tree (``outside/elsewhere``, which
    nothing may write into). A damage an earlier one took the place of is left out."""
    with contextlib.suppress(OSError):
        _damage(path, shape, outside)


def _damage(path: Path, shape: str, outside: Path) -> None:
    if shape in ("empty", "truncated", "garbage") and path.is_file():
        data = path.read_bytes()
        path.write_bytes(
            {"empty": b"", "truncated": data[: len(data) // 2], "garbage": os.urandom(40)}[shape]
        )
        return
    if path.is_dir() and not path.is_symlink():
        for child in path.iterdir():
            child.unlink()
        path.rmdir()
    else:
        path.unlink(missing_ok=True)
    if shape == "fifo":
        os.mkfifo(path)
    elif shape == "loop":
        path.symlink_to(path.name)
    elif shape == "dangling":
        path.symlink_to(path.parent / "gone")
    elif shape == "directory":
        path.mkdir()
    elif shape == "link-out":
        target = outside / "elsewhere"
        target.mkdir(exist_ok=True)
        path.symlink_to(target)
    else:
        path.write_bytes(b"")


# --- advisories ----------------------------------------------------------------------------------


def advisory_values() -> st.SearchStrategy[Any]:
    affected = [{"package": {"ecosystem": "PyPI", "name": "demo"}, "ranges": [
        {"type": "ECOSYSTEM", "events": [{"introduced": "0"}]}]}]  # fmt: skip
    return st.fixed_dictionaries({
        "id": _field(st.sampled_from(["TEST-1", "CVE-2099-1"]), TEXT),
        "aliases": _field(st.lists(st.sampled_from(["GHSA-x", "CVE-2099-2"]), max_size=2),
                          st.lists(TEXT, max_size=2) | TEXT),
        "summary": _field(st.just("a summary"), TEXT),
        "affected": _field(st.just(affected), TEXT | st.just([{"package": "x"}])),
        "schema_version": _field(st.just("1.6.0"), TEXT),
    }) | DEEP  # fmt: skip


@dataclass
class AdvisoryPlan:
    loose: list[Any]  # records written as files of a folder
    zipped: list[Any]  # records in an archive beside them
    special: list[str]  # names in the folder that are no file: FIFOs, loops, dangling links
    bomb: bool = False  # one member inflates 1,000 times


def advisory_plans() -> st.SearchStrategy[AdvisoryPlan]:
    return st.builds(AdvisoryPlan, loose=st.lists(advisory_values(), max_size=3),
                     zipped=st.lists(advisory_values(), max_size=3),
                     special=st.lists(st.sampled_from(["fifo", "loop", "dangling"]), max_size=2),
                     bomb=st.booleans())  # fmt: skip


def write_advisories(folder: Path, plan: AdvisoryPlan) -> None:
    folder.mkdir(parents=True)
    for i, record in enumerate(plan.loose):
        (folder / f"loose-{i}.json").write_text(dumps(record))
    with zipfile.ZipFile(folder / "all.zip", "w", compression=zipfile.ZIP_DEFLATED) as z:
        for i, record in enumerate(plan.zipped):
            z.writestr(f"z-{i}.json", dumps(record))
        if plan.bomb:
            z.writestr("bomb.json", bytes(2 << 20))
    for i, shape in enumerate(plan.special):
        path = folder / f"special-{i}.json"
        if shape == "fifo":
            os.mkfifo(path)
        elif shape == "loop":
            path.symlink_to(path.name)
        else:
            path.symlink_to(folder / "gone.json")


# --- nesting -------------------------------------------------------------------------------------


def nested_yaml(depth: int, flow: bool) -> str:
    """A YAML document nested ``depth`` deep under ``a:`` (flow lists, or block mappings)."""
    if flow:
        return "a: " + "[" * depth + "]" * depth + "\n"
    return "".join(f"{'  ' * i}k{i}:\n" for i in range(depth)) + f"{'  ' * depth}v: 1\n"
