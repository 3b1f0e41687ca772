"""The OCI documents parsed once into frozen types: every field a reader uses is checked for its
type, so that a manifest of any shape is either a typed value or one clear error naming the
document and the field (exit 12 from a layout, 7 from a registry), never a crash further on.
Hypothesis builds manifests and indexes field by field, each field a good value or a hostile one."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings

from xpu_release.errors import DamagedFileError, WireError
from xpu_release.guard import limits
from xpu_release.oci.model import ImageIndex, ImageManifest, parse, parse_config
from xpu_release.oci.registry import OCI_INDEX, OCI_MANIFEST, Manifest, sha256_digest

from ..guard.strategies import EXAMPLES, descriptors, documents, dumps, hostile

D = "sha256:" + "a" * 64
LAYER = {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": D, "size": 11}
CONFIG = {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": D, "size": 2}


def image(**fields: Any) -> bytes:
    return dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": CONFIG, "layers": [LAYER],
                  **fields}).encode()  # fmt: skip


def test_a_manifest_is_read_into_typed_fields() -> None:
    subject = {"mediaType": OCI_MANIFEST, "digest": "sha256:" + "b" * 64, "size": 3}
    view = parse(image(subject=subject, artifactType="application/x", annotations={"k": "v"}), what="m")

    assert isinstance(view, ImageManifest)
    assert (view.config.digest, view.config.size) == (D, 2)
    assert [(d.digest, d.size) for d in view.layers] == [(D, 11)]
    assert view.subject is not None
    assert view.subject.digest == "sha256:" + "b" * 64
    assert (view.artifact_type, dict(view.annotations)) == ("application/x", {"k": "v"})


def test_an_index_keeps_its_entries_as_written() -> None:
    foreign = {**LAYER, "mediaType": OCI_MANIFEST, "urls": ["https://x"], "data": "e30="}
    view = parse(json.dumps({"schemaVersion": 2, "manifests": [foreign]}).encode(), what="i")

    assert isinstance(view, ImageIndex)
    assert view.manifests[0].to_json() == foreign  # another tool's fields are kept


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"annotations": "a string"}, "m: annotations: not a map of strings (str)"),
        ({"annotations": {"k": 1}}, "m: annotations.k: not a string (int)"),
        ({"subject": "sha256:" + "b" * 64}, "m: subject: not a descriptor (str)"),
        ({"layers": [{**LAYER, "size": True}]}, "m: layers[0].size: not a size"),
        ({"layers": [{**LAYER, "size": -1}]}, "m: layers[0].size: not a size"),
        ({"layers": [{**LAYER, "size": 11.0}]}, "m: layers[0].size: not a size"),
        ({"layers": [{**LAYER, "digest": "sha256:ABC"}]}, "m: layers[0].digest: not a sha256 digest"),
        ({"layers": "none"}, "m: layers: not a list (str)"),
        ({"config": None}, "m: config: not a descriptor (NoneType)"),
        ({"schemaVersion": 1}, "m: schemaVersion: 1 is not 2"),
        ({"mediaType": 7}, "m: mediaType: not a string (int)"),
    ],
)
def test_a_field_of_another_type_is_one_error_naming_the_field(fields: dict[str, Any], said: str) -> None:
    with pytest.raises(WireError) as refused:
        parse(image(**fields), what="m", error=WireError)
    assert said in refused.value.message


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (image().replace(b'"size": 11', b'"size": 1e400'), "the number 1e400 is beyond a 64-bit float"),
        (image().replace(b'"size": 11', b'"size": ' + b"9" * 400), "longer than 32 characters"),
        (b'{"manifests": ' + b"[" * 3000 + b"]" * 3000 + b"}", "nested 3001 levels deep"),
        (b"<html>not json</html>", "is not JSON"),
        (b"[]", "not a JSON object (list)"),
    ],
)
def test_numbers_depth_and_non_json_are_refused_before_they_are_walked(body: bytes, said: str) -> None:
    with pytest.raises(DamagedFileError) as refused:
        parse(body, what="m")
    assert said in refused.value.message


def test_more_descriptors_than_the_bound_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_DESCRIPTORS", 2)
    with pytest.raises(DamagedFileError, match="layers: 3 entries; the limit is 2"):
        parse(image(layers=[LAYER] * 3), what="m")


def test_a_manifest_keeps_its_bytes_and_a_read_one_is_checked_at_once() -> None:
    body = image(annotations={"b": "2", "a": "1"}).replace(b", ", b",   ")  # not canonical JSON
    m = Manifest.read(body, digest=sha256_digest(body), media_type="", what="m", error=WireError)

    assert m.body == body  # never re-serialized: the digest stays the digest
    assert m.media_type == OCI_MANIFEST  # the one it states, as none was served
    with pytest.raises(WireError, match="m: subject: not a descriptor"):
        Manifest.read(image(subject="x"), digest=D, media_type=OCI_MANIFEST, what="m", error=WireError)


def test_a_config_gives_labels_and_diff_ids_or_says_which_is_wrong() -> None:
    good = json.dumps({"config": {"Labels": {"a": "b"}}, "rootfs": {"diff_ids": [D]}}).encode()
    assert parse_config(good, what="c").diff_ids == (D,)
    with pytest.raises(DamagedFileError, match=r"config\.Labels is not a map of strings"):
        parse_config(b'{"config": {"Labels": "x"}}', what="c")
    with pytest.raises(DamagedFileError, match=r"rootfs\.diff_ids is not a list of sha256 digests"):
        parse_config(b'{"rootfs": {"diff_ids": [1]}}', what="c")


@settings(max_examples=EXAMPLES)
@given(documents())
def test_any_document_is_a_typed_value_or_one_clear_error(body: bytes) -> None:
    try:
        view = parse(body, what="doc")
    except DamagedFileError as exc:
        refused = exc.message
    else:
        refused = ""
    if refused:
        assert refused.startswith("doc")
        assert "\n" not in refused
        return
    for d in view.blobs() if isinstance(view, ImageManifest) else view.manifests:
        assert type(d.size) is int
        assert 0 <= d.size <= limits.MAX_INT64
        assert all(isinstance(v, str) for v in d.annotations.values())


@settings(max_examples=EXAMPLES)
@given(descriptors(good=True))
def test_a_good_descriptor_reads_back_as_written(desc: dict[str, Any]) -> None:
    view = parse(
        json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [desc]}).encode(), what="i"
    )

    assert isinstance(view, ImageIndex)
    assert view.manifests[0].to_json() == desc
    assert (view.manifests[0].digest, view.manifests[0].size) == (desc["digest"], desc["size"])


def test_the_hostile_values_are_each_refused_where_a_size_belongs() -> None:
    for value in hostile.SIZES:
        with pytest.raises(DamagedFileError):
            parse(image(layers=[{**LAYER, "size": value}]), what="m")
