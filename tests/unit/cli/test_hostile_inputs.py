"""The inputs that ended in exit 70 (or hung) before the guarded layer (issue #38's list and its
kin), each through the real command that reads it: now a documented exit code naming the input,
with no traceback, within a deadline. Each case was run against the code before the guarded
layer and failed there (exit 70, or still running at the deadline)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import Result

from ..fake_registry import State, fake_registry
from ..guard.strategies import OCI_MANIFEST, Raw, digest_of, dumps
from ..helpers import run
from .hostile import (
    LAYER,
    REF,
    REPO,
    a_users_error,
    advisory,
    image_value,
    invoke,
    layout,
    publish_to,
    record_value,
    referrer_value,
    registries_for,
    release_fifos,
    without_an_engine,
    zipped,
)

BIG = Raw("9" * 400)
INF = Raw("1e400")
DEEP_JSON = "[" * 5000 + "]" * 5000
DEEP_YAML = "a: " + "[" * 600 + "]" * 600 + "\n"  # under libyaml's own bound (1,000)

# --- layouts: mirror --from oci:SRC --to oci:DST (exit 12: the layout is damaged) ------------------


@dataclass(frozen=True)
class LayoutCase:
    name: str
    make: Callable[[Path], object]  # builds the source layout at the path
    said: str  # what the error names


def _fifo(what: str) -> Callable[[Path], object]:
    def make(root: Path) -> None:
        path = layout(root)[what]
        path.unlink()
        os.mkfifo(path)

    return make


def _text(what: str, text: str) -> Callable[[Path], object]:
    def make(root: Path) -> None:
        layout(root)[what].write_text(text)

    return make


def _image(**fields: object) -> Callable[[Path], object]:
    return lambda root: layout(root, image=image_value(**fields))


LAYER_OF = {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": "sha256:" + "0" * 64}
LAYOUTS = [
    LayoutCase(
        "a layer's size is 1e400", _image(layers=[{**LAYER_OF, "size": INF}]), "beyond a 64-bit float"
    ),
    # the layer is there, so that the copy goes on to count its bytes (where 10^400 overflowed)
    LayoutCase(
        "a layer's size has 400 digits",
        _image(layers=[{**LAYER_OF, "digest": digest_of(LAYER), "size": BIG}]),
        "longer than 32 characters",
    ),
    LayoutCase(
        "the config's size is 1e400", _image(config={**LAYER_OF, "size": INF}), "beyond a 64-bit float"
    ),
    LayoutCase(
        "index.json nested 5000 deep",
        _text("index.json", '{"manifests": ' + DEEP_JSON + "}"),
        "nested 5001 levels deep",
    ),
    LayoutCase(
        "oci-layout nested 1500 deep", _text("oci-layout", "[" * 1500 + "]" * 1500), "nested 1500 levels deep"
    ),
    LayoutCase(
        "the image manifest nested 5000 deep",
        lambda root: layout(root, image=Raw(DEEP_JSON)),
        "nested 5000 levels deep",
    ),
    LayoutCase(
        "the image's annotations are a string",
        _image(annotations="a string"),
        "annotations: not a map of strings",
    ),
    LayoutCase(
        "the image's subject is a string", _image(subject="sha256:" + "1" * 64), "subject: not a descriptor"
    ),
    LayoutCase(
        "a referrer's subject is a string",
        lambda root: layout(root, referrer=referrer_value("IMAGE", subject="IMAGE")),
        "subject: not a descriptor",
    ),
    LayoutCase(
        "a referrer's annotations are a string",
        lambda root: layout(root, referrer=referrer_value("IMAGE", annotations="IMAGE")),
        "annotations: not a map of strings",
    ),
    LayoutCase("index.json is a FIFO", _fifo("index.json"), "index.json is a FIFO"),
    LayoutCase("oci-layout is a FIFO", _fifo("oci-layout"), "oci-layout is a FIFO"),
]


@pytest.mark.parametrize("case", LAYOUTS, ids=lambda c: c.name)
def test_a_damaged_source_layout_is_exit_12_naming_it(repo: Path, tmp_path: Path, case: LayoutCase) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    case.make(source)

    result = invoke(repo, ["mirror", REF, "--from", f"oci:{source}", "--to", f"oci:{target}"],
                    unstick=release_fifos(source))  # fmt: skip

    a_users_error(result, 12)
    assert str(source) in result.stderr
    assert case.said in result.stderr
    assert not target.exists()  # everything is read before the first write: nothing is written


# --- registry answers: mirror --from HOST/REPO --to oci:DST (exit 7: the registry misbehaves) ------


@dataclass(frozen=True)
class RegistryCase:
    name: str
    arrange: Callable[[State], object]
    said: str


def _answer(**faults: object) -> Callable[[State], object]:
    def arrange(state: State) -> None:
        publish_to(state)
        state.referrers_api = True
        for k, v in faults.items():
            setattr(state.faults, k, v)

    return arrange


def _served(
    image: str = "", media: str = OCI_MANIFEST, referrer: str | None = None
) -> Callable[[State], object]:
    return lambda state: publish_to(state, image=image or None, media=media, referrer=referrer)


REGISTRIES = [
    RegistryCase(
        "a manifest that is not JSON, of no media type", _served("<html>busy</html>", media=""), "is not JSON"
    ),
    RegistryCase(
        "a manifest that is a JSON list, of no media type", _served("[]", media=""), "not a JSON object"
    ),
    RegistryCase("a manifest nested 5000 deep", _served(DEEP_JSON), "nested 5000 levels deep"),
    RegistryCase(
        "a layer's size is 1e400",
        _served(dumps(image_value(layers=[{**LAYER_OF, "size": INF}]))),
        "beyond a 64-bit float",
    ),
    RegistryCase(
        "the image's annotations are a string",
        _served(dumps(image_value(annotations="x"))),
        "annotations: not a map of strings",
    ),
    RegistryCase(
        "a referrer's annotations are a string",
        _served(referrer=dumps(referrer_value("IMAGE", annotations="x"))),
        "annotations: not a map",
    ),
    RegistryCase(
        "a referrer's subject is a string",
        _served(referrer=dumps(referrer_value("IMAGE", subject="IMAGE"))),
        "subject: not a descriptor",
    ),
    RegistryCase(
        "a referrers answer whose manifests is a string",
        _answer(referrers_body=b'{"manifests": "x"}'),
        "manifests: not a list",
    ),
    RegistryCase("a referrers answer that is not JSON", _answer(referrers_body=b"<html>"), "is not JSON"),
    RegistryCase(
        "a referrers answer nested 5000 deep",
        _answer(referrers_body=DEEP_JSON.encode()),
        "nested 5000 levels deep",
    ),
]


@pytest.mark.parametrize("case", REGISTRIES, ids=lambda c: c.name)
def test_a_registry_answer_of_another_shape_is_exit_7_naming_it(
    repo: Path, tmp_path: Path, case: RegistryCase
) -> None:
    with fake_registry() as (host, state):
        case.arrange(state)
        result = invoke(
            repo,
            [
                "--registries",
                str(registries_for(tmp_path, host)),
                "mirror",
                REF,
                "--from",
                f"{host}/{REPO}",
                "--to",
                f"oci:{tmp_path / 'target'}",
            ],
        )

    a_users_error(result, 7)
    assert case.said in result.stderr


@pytest.mark.parametrize(
    ("faults", "said"),
    [
        ({"flood": "blobs"}, "sends more than the"),  # a layer listed at 2,000 bytes, sent for ever
        ({"flood": "blobs", "flood_declares": 1 << 40}, "declares 1099511627776 bytes"),
        ({"trickle": 0.05}, "below the minimum of 1000 bytes/s"),  # 20 bytes a second
        ({"flood": "manifests"}, "more than the limit of 4194304 bytes"),
    ],
    ids=["a blob that never ends", "a blob that declares a terabyte", "a registry that trickles",
         "a manifest that never ends"],
)  # fmt: skip
def test_a_registry_that_floods_or_trickles_is_stopped_and_exit_7(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, faults: dict[str, object], said: str
) -> None:
    from xpu_release.guard import bodies

    # the minimum rate checked every 0.3 s, so that a trickle fails in a moment
    monkeypatch.setattr(bodies, "DEFAULT_PACE", bodies.Pace(min_rate=1000, window=0.3, deadline=3.0))
    with fake_registry() as (host, state):
        publish_to(state, layer=LAYER * 200)
        for k, v in faults.items():
            setattr(state.faults, k, v)
        result = invoke(repo, ["--registries", str(registries_for(tmp_path, host)), "mirror", REF,
                               "--from", f"{host}/{REPO}", "--to", f"oci:{tmp_path / 'target'}"],
                        unstick=state.stopped.set)  # fmt: skip

    a_users_error(result, 7)
    assert said in result.stderr
    assert not list((tmp_path / "target").rglob("*.partial"))


# --- release records: notes, diff, the next version's notes ---------------------------------------


@pytest.mark.parametrize("field", ["aliases", "fixed", "purls"])
def test_a_record_whose_finding_has_an_integer_list_is_exit_12_for_notes(
    repo: Path, tmp_path: Path, field: str
) -> None:
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record_value(**{field: 7})))

    result = invoke(repo, ["notes", REF, "--record", str(path)])

    a_users_error(result, 12)
    assert f"scan.findings.0.{field}: 7 is not of type 'array'" in result.stderr


@pytest.mark.parametrize("field", ["aliases", "fixed"])
def test_diff_and_the_next_versions_notes_pass_over_a_damaged_record(repo: Path, field: str) -> None:
    xpu = "training-xpu-pytorch"
    assert run(repo, "new-version", f"{xpu}:25.04", "--from", "25.03").exit_code == 0
    for version in ("25.03", "25.04"):
        path = repo / "out" / "releases" / xpu / f"{version}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        value = record_value(**({field: 7} if version == "25.03" else {}))
        path.write_text(
            json.dumps({**value, "ref": f"{xpu}:{version}", "manifest": f"manifests/{xpu}/{version}.yaml"})
        )

    changes = invoke(repo, ["diff", f"{xpu}:25.03", f"{xpu}:25.04"])
    notes = invoke(repo, ["notes", f"{xpu}:25.04"])

    a_users_error(changes, 0)
    a_users_error(notes, 0)
    assert "security" not in changes.stdout  # one of the two records says nothing: no comparison


# --- sizes typed by a user -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["cache", "prune", "--keep-storage", "9" * 400], {}),
        (["release", REF, "--dry-run"], {"XPU_RELEASE_CACHE_MAX": "9" * 400}),
        (["publish", REF], {"XPU_RELEASE_CACHE_MAX": "9" * 400}),
    ],
    ids=["--keep-storage", "XPU_RELEASE_CACHE_MAX (dry run)", "XPU_RELEASE_CACHE_MAX (publish)"],
)
def test_a_400_digit_size_is_a_configuration_error(
    repo: Path, tmp_path: Path, argv: list[str], env: dict[str, str]
) -> None:
    closed = registries_for(tmp_path, "127.0.0.1:1")
    result = invoke(repo, ["--registries", str(closed), *argv],
                    env={"XPU_RELEASE_CACHE": str(tmp_path / "cache"), **env})  # fmt: skip

    a_users_error(result, 3)
    assert "(402 characters) is not a size" in result.stderr or "is not a size" in result.stderr


# --- YAML nested under libyaml's bound -------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "argv", "code"),
    [
        ("manifests/training-cpu-pytorch/25.03.yaml", ["validate"], 2),
        ("images/training-cpu-pytorch/vex.openvex.json", ["validate"], 2),
        ("images/training-cpu-pytorch/image.yaml", ["render", REF], 2),
        ("deep-registries.yaml", ["--registries", "deep-registries.yaml", "plan", REF], 3),
    ],
    ids=["a manifest", "a VEX document", "image.yaml", "a registries file"],
)
def test_yaml_nested_600_deep_is_a_located_error(repo: Path, where: str, argv: list[str], code: int) -> None:
    (repo / where).write_text(DEEP_YAML)
    argv = [str(repo / a) if a == where else a for a in argv]

    result = invoke(repo, argv)

    a_users_error(result, code)
    assert "nested deeper than 64 levels" in result.stderr


# --- advisories: scan --advisories (the engine and the SBOM stand in) -----------------------------


def _loose_deep(folder: Path) -> Path:
    folder.mkdir()
    (folder / "deep.json").write_text(DEEP_JSON)
    (folder / "real.json").write_text(json.dumps(advisory()))
    return folder


def _zipped(**members: bytes) -> Callable[[Path], Path]:
    return lambda folder: zipped(
        folder.with_suffix(".zip"), {"real.json": json.dumps(advisory()).encode(), **members}
    )


def _patched(offset: int, value: bytes) -> Callable[[Path], Path]:
    """An archive whose one member's header is changed where a hostile writer changes it."""

    def make(folder: Path) -> Path:
        path = zipped(folder.with_suffix(".zip"), {"a.json": json.dumps(advisory()).encode() * 20})
        data = bytearray(path.read_bytes())
        for start, shift in ((data.find(b"PK\x03\x04"), 0), (data.find(b"PK\x01\x02"), 2)):
            data[start + offset + shift : start + offset + shift + len(value)] = value
        path.write_bytes(bytes(data))
        return path

    return make


def _corrupt(folder: Path) -> Path:
    path = zipped(folder.with_suffix(".zip"), {"a.json": json.dumps(advisory()).encode() * 20})
    data = bytearray(path.read_bytes())
    data[data.find(b"PK\x03\x04") + 30 + len("a.json")] ^= 0xFF  # the deflate stream's first byte
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize(
    ("make", "code", "said"),
    [
        (_loose_deep, 14, "TEST-1"),  # the deep record is counted unreadable; the real one still blocks
        (_zipped(**{"deep.json": DEEP_JSON.encode()}), 14, "TEST-1"),
        (_patched(6, b"\x01\x00"), 12, "member a.json is encrypted"),
        (_patched(8, b"\x63\x00"), 12, "member a.json is compressed with method 99"),
        (_corrupt, 12, "member a.json is damaged"),
    ],
    ids=["a loose record 5000 deep", "a zipped record 5000 deep", "an encrypted member",
         "an unknown method", "a corrupt member"],
)  # fmt: skip
def test_hostile_advisories_are_counted_or_named_never_a_crash(
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[[Path], Path],
    code: int,
    said: str,
) -> None:
    without_an_engine(monkeypatch)
    advisories = make(tmp_path / "osv")

    result = scan(repo, advisories)

    a_users_error(result, code)
    assert said in result.output


def scan(repo: Path, advisories: Path, *options: str) -> Result:
    """``scan REF --advisories PATH``, its cache beside the advisories (the engine stands in)."""
    cache = {"XPU_RELEASE_CACHE": str(advisories.parent / "cache")}
    argv = ["scan", REF, "--advisories", str(advisories), *options]
    return invoke(repo, argv, env=cache, unstick=release_fifos(advisories.parent))


@pytest.fixture
def osv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder of advisories, and ``scan`` without an engine."""
    without_an_engine(monkeypatch)
    (tmp_path / "osv").mkdir()
    return tmp_path / "osv"


def test_an_advisory_id_cannot_forge_a_line_or_an_escape(repo: Path, osv: Path) -> None:
    forged = "TEST-1\nerror: nothing found, passed\x1b[2J\r\u202e"
    (osv / "forged.json").write_text(json.dumps(advisory(id=forged)))

    result = scan(repo, osv)
    as_json = scan(repo, osv, "--json")

    a_users_error(result, 14)
    assert not {"\x1b", "\r", "\u202e"} & set(result.output)
    assert not any(line.startswith("error: nothing found") for line in result.output.splitlines())
    shown = "TEST-1\\nerror: nothing found, passed\\x1b[2J\\r\\u202e"
    assert shown in result.stdout  # the id, escaped, on the finding's own line
    assert [f["id"] for f in json.loads(as_json.stdout)["findings"]] == [shown]


def test_fifos_and_link_loops_among_advisories_are_counted_never_opened(repo: Path, osv: Path) -> None:
    os.mkfifo(osv / "waiting.json")
    (osv / "loop.json").symlink_to("loop.json")
    (osv / "gone.json").symlink_to(osv / "nothing.json")
    (osv / "real.json").write_text(json.dumps(advisory()))

    result = scan(repo, osv, "--json")

    a_users_error(result, 14)
    counts = json.loads(result.stdout)["records"]
    assert (counts["records"], counts["skipped"]) == (1, 3)
