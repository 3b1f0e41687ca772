"""Layer codecs: every codec's blob is a pure function of the layer, read by any gzip (or zstd)
reader, named by a key that holds everything its bytes depend on; a codec the pulling engines
cannot read is refused unless the user says they can; a blob is read back member by member,
and a damaged one is an error, never a wrong answer."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from xpu_release.errors import ConfigError, PublishError, WireError
from xpu_release.manifest.registries import Endpoint
from xpu_release.oci import members as members_module
from xpu_release.oci.codec import DEFAULT, GZIP_TYPE, LEVELS, ZSTD_TYPE, Codec, decompressed, parse_codec
from xpu_release.oci.credentials import Credentials
from xpu_release.oci.downloads import read_blob
from xpu_release.oci.members import MEMBER, CompressedMap, Members, compress
from xpu_release.oci.model import Descriptor
from xpu_release.oci.registry import RegistryClient, RetryPolicy
from xpu_release.release.publishing.push import unpacked_digest

from ...conftest import examples
from ..fake_registry import State, digest_of, fake_registry

GZIP_CODECS = [Codec("isal", 2), Codec("isal", 0), Codec("zlib-ng", 6), Codec("zlib", 6)]
ALL_CODECS = [*GZIP_CODECS, Codec("zstd", 3)]
LAYER = (b"tar header and some text " * 4000) + os.urandom(50_000) + bytes(range(256)) * 300


def chunks_of(data: bytes, size: int) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def test_the_default_is_isal_level_2_writing_gzip() -> None:
    assert Codec("isal", 2) == DEFAULT
    assert DEFAULT.format == "gzip"
    assert DEFAULT.media_type == GZIP_TYPE


@pytest.mark.parametrize("codec", GZIP_CODECS, ids=str)
def test_a_gzip_codec_writes_members_any_gzip_reader_reads(codec: Codec) -> None:
    member = codec.compressor()(LAYER)
    assert member[:3] == b"\x1f\x8b\x08"  # gzip, deflate
    assert member[4:8] == b"\0\0\0\0"  # mtime 0: no time in the blob
    assert gzip.decompress(member) == LAYER  # Python's stdlib reader, as Go's would


@pytest.mark.parametrize("codec", ALL_CODECS, ids=str)
def test_the_same_layer_makes_the_same_blob_every_time(codec: Codec, tmp_path: Path) -> None:
    layer = tmp_path / "layer.tar"
    layer.write_bytes(LAYER * 3)
    spools = [tmp_path / "a", tmp_path / "b"]
    blobs = []
    for spool in spools:
        spool.mkdir()
        with ThreadPoolExecutor(max_workers=2) as pool:
            blobs.append(compress(layer, spool, pool, codec))
    assert blobs[0] == blobs[1]
    assert blobs[0].media_type == codec.media_type
    written = (spools[0] / blobs[0].digest.replace(":", "-")).read_bytes()
    assert digest_of(written) == blobs[0].digest
    assert b"".join(decompressed([written], codec.media_type)) == LAYER * 3


def test_a_layer_past_one_member_is_cut_at_fixed_offsets(tmp_path: Path) -> None:
    layer = tmp_path / "layer.tar"
    layer.write_bytes(os.urandom(1000) * ((MEMBER + 5000) // 1000))
    with ThreadPoolExecutor(max_workers=2) as pool:
        blob = compress(layer, tmp_path, pool, DEFAULT)
    data = (tmp_path / blob.digest.replace(":", "-")).read_bytes()
    first = DEFAULT.compressor()(layer.read_bytes()[:MEMBER])
    assert data.startswith(first)  # the first member is the first 32 MiB alone
    assert gzip.decompress(data) == layer.read_bytes()  # members read as one stream


def test_the_key_names_library_version_architecture_and_level() -> None:
    keys = {c.key for c in ALL_CODECS}
    assert len(keys) == len(ALL_CODECS)
    assert DEFAULT.key.startswith("isal-")
    assert DEFAULT.key.endswith("-level-2")
    assert DEFAULT.version in DEFAULT.key
    assert CompressedMap(Codec("isal", 1))._map.folder != CompressedMap(Codec("isal", 2))._map.folder


# --- choosing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "codec"),
    [("isal", Codec("isal", 2)), ("isal:3", Codec("isal", 3)), ("zlib-ng:1", Codec("zlib-ng", 1)),
     ("zlib", Codec("zlib", 6)), (" zlib-ng ", Codec("zlib-ng", 6))],
)  # fmt: skip
def test_a_codec_is_named_library_and_optional_level(text: str, codec: Codec) -> None:
    assert parse_codec(text, accept_zstd=False, where="--compression") == codec


@pytest.mark.parametrize(
    ("text", "says"),
    [("brotli", "unknown codec 'brotli'"), ("isal:4", "isal takes a level from 0 to 3, not '4'"),
     ("zlib:x", "zlib takes a level from 0 to 9"), ("zstd:0", "zstd takes a level from 1 to 19"),
     ("", "unknown codec ''")],
)  # fmt: skip
def test_an_unknown_codec_or_level_is_a_config_error_naming_where(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=r"^\$XPU_RELEASE_COMPRESSION=x: ") as e:
        parse_codec(text, accept_zstd=False, where="$XPU_RELEASE_COMPRESSION=x")
    assert says in str(e.value)


def test_zstd_is_refused_unless_the_pulling_engines_read_it() -> None:
    with pytest.raises(ConfigError, match="Docker before 23") as e:
        parse_codec("zstd", accept_zstd=False, where="--compression zstd")
    assert "--pullers-accept-zstd" in str(e.value)
    assert parse_codec("zstd", accept_zstd=True, where="--compression zstd") == Codec("zstd", 3)
    assert Codec("zstd", 3).media_type == ZSTD_TYPE


# --- reading back ------------------------------------------------------------------------------


@settings(max_examples=examples(40), deadline=None)
@given(
    parts=st.lists(st.binary(max_size=3000), min_size=1, max_size=4),
    chunk=st.integers(min_value=1, max_value=5000),
    library=st.sampled_from(sorted(LEVELS)),
)
def test_any_blob_of_members_reads_back_whole_however_the_network_cuts_it(
    parts: list[bytes], chunk: int, library: str
) -> None:
    codec = parse_codec(library, accept_zstd=True, where="test")
    blob = b"".join(codec.compressor()(p) for p in parts)
    assert b"".join(decompressed(chunks_of(blob, chunk), codec.media_type)) == b"".join(parts)


@pytest.mark.parametrize("codec", ALL_CODECS, ids=str)
def test_a_blob_cut_short_or_damaged_is_an_error(codec: Codec) -> None:
    blob = codec.compressor()(LAYER)
    with pytest.raises(ValueError, match="ends inside a member"):
        b"".join(decompressed([blob[: len(blob) // 2]], codec.media_type))
    with pytest.raises(ValueError, match="not a valid"):
        b"".join(decompressed([blob[:20] + b"\xff" * 64 + blob[84:]], codec.media_type))


def test_zstd_frames_are_what_any_zstd_reader_reads() -> None:
    blob = Codec("zstd", 3).compressor()(LAYER) + Codec("zstd", 3).compressor()(b"more")
    reader = zstandard.ZstdDecompressor().stream_reader(blob, read_across_frames=True)
    assert reader.read() == LAYER + b"more"


# --- the identity check at an endpoint --------------------------------------------------------


def client_for(host: str, state: State) -> RegistryClient:
    ep = Endpoint(registry="public", role="public", region=None, host=host, namespace="ns", insecure=True)
    fast = RetryPolicy(attempts=2, base_delay=0.0, max_delay=0.0, timeout=10.0)
    return RegistryClient(ep, Credentials(username=state.username, password=state.password), fast)


def layer(blob: bytes, media_type: str) -> Descriptor:
    """How a manifest lists ``blob`` as a layer."""
    return Descriptor(media_type=media_type, digest=digest_of(blob), size=len(blob))


@pytest.mark.parametrize("codec", [DEFAULT, Codec("zstd", 3)], ids=str)
def test_a_served_blob_unpacks_to_its_layer_digest(codec: Codec, tmp_path: Path) -> None:
    blob = codec.compressor()(LAYER[:70_000]) + codec.compressor()(LAYER[70_000:])
    path = tmp_path / "blob"
    path.write_bytes(blob)
    with fake_registry() as (host, state):
        client = client_for(host, state)
        client.upload_blob("ns/image", digest_of(blob), path)
        got = unpacked_digest(client, "ns/image", layer(blob, codec.media_type))
    assert got == "sha256:" + hashlib.sha256(LAYER).hexdigest()


def test_a_served_blob_that_does_not_unpack_is_a_publish_error(tmp_path: Path) -> None:
    blob = DEFAULT.compressor()(LAYER)[:-100]
    path = tmp_path / "blob"
    path.write_bytes(blob)
    with fake_registry() as (host, state):
        client = client_for(host, state)
        client.upload_blob("ns/image", digest_of(blob), path)
        with pytest.raises(PublishError, match="does not unpack: the compressed stream ends inside"):
            unpacked_digest(client, "ns/image", layer(blob, GZIP_TYPE))


@contextlib.contextmanager
def served(blob: bytes, tmp_path: Path) -> Iterator[tuple[RegistryClient, State, str]]:
    """A fake registry holding ``blob`` in ns/image, a client of it, and the blob's digest."""
    path = tmp_path / "blob"
    path.write_bytes(blob)
    with fake_registry() as (host, state):
        client = client_for(host, state)
        client.upload_blob("ns/image", digest_of(blob), path)
        yield client, state, digest_of(blob)


def blob_readers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "blob-read"]


@pytest.mark.parametrize("ahead", [True, False], ids=["read-ahead", "direct"])
def test_a_reader_stopped_early_leaves_no_thread_behind(tmp_path: Path, ahead: bool) -> None:
    blob = os.urandom(12 << 20)
    with served(blob, tmp_path) as (client, _, digest):
        stream = read_blob(client, "ns/image", digest, 1 << 16, size=len(blob), ahead=ahead)
        assert len(next(stream)) == 1 << 16
        stream.close()
        whole = b"".join(read_blob(client, "ns/image", digest, size=len(blob), ahead=ahead))
    assert whole == blob
    assert not blob_readers()


@pytest.mark.parametrize("ahead", [True, False], ids=["read-ahead", "direct"])
def test_a_download_cut_short_is_a_wire_error_naming_endpoint_and_blob(tmp_path: Path, ahead: bool) -> None:
    blob = os.urandom(3 << 20)
    with served(blob, tmp_path) as (client, state, digest):
        state.faults.cut_blob_gets = 1
        with pytest.raises(WireError) as cut:
            b"".join(read_blob(client, "ns/image", digest, 1 << 16, size=len(blob), ahead=ahead))
        again = b"".join(read_blob(client, "ns/image", digest, size=len(blob), ahead=ahead))
    assert again == blob  # the next read is whole
    assert digest in cut.value.message
    assert client.endpoint.name in cut.value.message
    assert "broke" in cut.value.message
    assert not blob_readers()


@settings(max_examples=examples(30), deadline=None)
@given(
    cuts=st.lists(st.integers(min_value=1, max_value=9000), min_size=1, max_size=40),
    length=st.integers(min_value=0, max_value=30_000),
)
def test_a_layer_compressed_as_it_streams_is_the_blob_of_the_whole_file(
    cuts: list[int], length: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """However the export's chunks fall, the pieces are cut at the same offsets (a small member
    size here, so that a layer spans many)."""
    tmp = tmp_path_factory.mktemp("stream")
    layer = (LAYER * 2)[:length]
    source = tmp / "layer.tar"
    source.write_bytes(layer)
    (tmp / "streamed").mkdir()
    with pytest.MonkeyPatch.context() as mp, ThreadPoolExecutor(max_workers=2) as pool:
        mp.setattr(members_module, "MEMBER", 4096)
        whole = compress(source, tmp, pool, DEFAULT)
        members = Members(tmp / "streamed", pool, DEFAULT)
        at, i = 0, 0
        while at < len(layer):
            step = cuts[i % len(cuts)]
            members.write(layer[at : at + step])
            at, i = at + step, i + 1
        streamed = members.blob()
    assert streamed == whole
    assert (tmp / "streamed" / streamed.digest.replace(":", "-")).read_bytes() == (
        tmp / whole.digest.replace(":", "-")
    ).read_bytes()


def test_a_dropped_layer_leaves_nothing_in_the_spool(tmp_path: Path) -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        members = Members(tmp_path, pool, DEFAULT)
        members.write(LAYER)
        members.discard()
    assert list(tmp_path.iterdir()) == []
