"""Reading layers out of the engine's export: each layer handed on while it streams, kept or
dropped by its hash, and the layers that cannot be the ones asked for read past by their size."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from xpu_release import settings
from xpu_release.errors import StackError
from xpu_release.image.export import layer_sizes, save_layers, stream_layers


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class FakeExport:
    """An engine whose ``get_image`` streams a ``docker save`` of the given layers, as docker
    20.10 lays it out: one folder per layer under an id that is not its diff_id, in the order
    of those ids, and the config beside them; in chunks of an awkward size."""

    def __init__(self, layers: list[bytes]) -> None:
        self.layers = layers
        self.config = json.dumps({"rootfs": {"diff_ids": [digest_of(x) for x in layers]}}).encode()
        self.image_id = digest_of(self.config)
        self.exports = 0
        self.api = SimpleNamespace(get_image=self.get_image)

    @property
    def diff_ids(self) -> list[str]:
        return [digest_of(x) for x in self.layers]

    def get_image(self, image_id: str, chunk_size: int) -> Iterator[bytes]:
        assert image_id == self.image_id
        self.exports += 1
        buf = io.BytesIO()
        files = {f"{hashlib.sha256(b'v1' + x).hexdigest()}/layer.tar": x for x in self.layers}
        files[image_id.split(":")[1] + ".json"] = self.config
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name in sorted(files):
                info = tarfile.TarInfo(name)
                info.size = len(files[name])
                tar.addfile(info, io.BytesIO(files[name]))
        data = buf.getvalue()
        for at in range(0, len(data), 7777):
            yield data[at : at + 7777]


class Recorder:
    """``open_layer`` for the stream: what each sink was given, and what became of it."""

    def __init__(self) -> None:
        self.opened: list[int] = []
        self.kept: dict[str, bytes] = {}
        self.dropped = 0

    def __call__(self, size: int) -> Recorder.Sink:
        self.opened.append(size)
        return Recorder.Sink(self)

    class Sink:
        def __init__(self, owner: Recorder) -> None:
            self.owner, self.data = owner, bytearray()

        def write(self, data: bytes) -> None:
            self.data += data

        def keep(self, diff_id: str) -> None:
            self.owner.kept[diff_id] = bytes(self.data)

        def drop(self) -> None:
            self.owner.dropped += 1


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path) -> Iterator[None]:
    before = settings.current()
    settings.use(replace(before, cache=tmp_path / "cache"))
    yield
    settings.use(before)


LAYERS = [b"base " * 3000, b"torch " * 20000, b"ray " * 500, b"accelerate " * 40]


def test_the_layers_asked_for_reach_their_sinks_whole_and_the_rest_are_dropped() -> None:
    engine = FakeExport(LAYERS)
    wanted = {engine.diff_ids[1], engine.diff_ids[3]}
    sinks = Recorder()
    config = stream_layers(engine, engine.image_id, wanted, sinks)  # type: ignore[arg-type]
    assert config == engine.config
    assert sinks.kept == {engine.diff_ids[1]: LAYERS[1], engine.diff_ids[3]: LAYERS[3]}
    assert len(sinks.opened) == len(sinks.kept) + sinks.dropped


def test_once_the_sizes_are_known_a_layer_that_cannot_be_one_asked_for_is_read_past() -> None:
    engine = FakeExport(LAYERS)
    stream_layers(engine, engine.image_id, set(engine.diff_ids), Recorder())  # type: ignore[arg-type]
    sinks = Recorder()
    wanted = {engine.diff_ids[3]}
    stream_layers(engine, engine.image_id, wanted, sinks, engine.diff_ids)  # type: ignore[arg-type]
    assert sinks.opened == [len(LAYERS[3])]  # no other layer was written, compressed or hashed
    assert sinks.kept == {engine.diff_ids[3]: LAYERS[3]}


def test_a_new_layer_the_size_of_an_unchanged_one_is_still_found_by_streaming_again() -> None:
    old = FakeExport(LAYERS)
    stream_layers(old, old.image_id, set(old.diff_ids), Recorder())  # type: ignore[arg-type]
    bumped = FakeExport([*LAYERS[:3], b"RAY " * 500])  # new bytes, of the size of a layer below it
    new = bumped.diff_ids[3]
    sinks = Recorder()
    stream_layers(bumped, bumped.image_id, {new}, sinks, bumped.diff_ids)  # type: ignore[arg-type]
    assert sinks.kept == {new: bumped.layers[3]}
    assert bumped.exports == 2  # the guess read it past; the second pass, guessing nothing, found it


def test_a_damaged_size_in_the_cache_costs_a_second_pass_never_a_layer() -> None:
    engine = FakeExport(LAYERS)
    for d in engine.diff_ids:
        layer_sizes().put(d, "12")  # every size wrong
    sinks = Recorder()
    wanted = {engine.diff_ids[0], engine.diff_ids[2]}
    stream_layers(engine, engine.image_id, wanted, sinks, engine.diff_ids)  # type: ignore[arg-type]
    assert sinks.kept == {engine.diff_ids[0]: LAYERS[0], engine.diff_ids[2]: LAYERS[2]}
    assert layer_sizes().get(engine.diff_ids[0]) == str(len(LAYERS[0]))  # put right by the stream


def test_an_export_without_a_layer_asked_for_is_a_stack_error_naming_it() -> None:
    engine = FakeExport(LAYERS)
    absent = digest_of(b"not in this image")
    with pytest.raises(StackError) as info:
        stream_layers(engine, engine.image_id, {absent}, Recorder(), engine.diff_ids)  # type: ignore[arg-type]
    assert absent in info.value.message


def test_save_layers_writes_each_layer_asked_for_to_a_file_and_leaves_no_other(tmp_path: Path) -> None:
    engine = FakeExport(LAYERS)
    into = tmp_path / "out"
    into.mkdir()
    config, files = save_layers(engine, engine.image_id, {engine.diff_ids[2]}, into)  # type: ignore[arg-type]
    assert config == engine.config
    assert files[engine.diff_ids[2]].read_bytes() == LAYERS[2]
    assert sorted(into.iterdir()) == [files[engine.diff_ids[2]]]
