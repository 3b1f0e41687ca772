"""Session 9 of the adversary: eStargz layers. ``LayerCheck`` holds a blob a registry serves
against its TOC so that a lazy puller (the stargz snapshotter: Go's ``encoding/json`` reading the
TOC, ``estargz.go``'s ``initFields``) and every other puller (Go's ``archive/tar`` unpacking the
tar) see one file system. Each test is a reproduction: it fails until the behaviour it names
holds. Where the test says what a Go reader makes of a blob, that was seen with the snapshotter's
own reader (Debian's estargz package) and with ``archive/tar`` over the same bytes."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import tarfile
import tracemalloc
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from xpu_release.errors import BuildFailed, ManifestError
from xpu_release.image import profile as profile_mod
from xpu_release.image.engine import Engine
from xpu_release.image.layerform import read_profile
from xpu_release.oci import estargz
from xpu_release.oci.estargz import TOC_DIGEST_ANNOTATION, TOC_NAME, UNCOMPRESSED_SIZE_ANNOTATION
from xpu_release.oci.toc import LayerCheck

from ..oci.estargz_layers import layer_tar, problem_of, with_toc, written

EPOCH = 946684800
MODTIME = "2000-01-01T00:00:00Z"
SMALL = layer_tar({"d/": None, "d/a": b"alpha" * 300, "d/b": b"", "d/c": b"x" * 5000})
_, _, BLOB = written(SMALL, prefetch=("/d/c",))


# --- a blob made by hand: any tar headers, any TOC, each file's data starting a member -------------


def _header(name: str, *, kind: bytes = tarfile.REGTYPE, size: int = 0, mode: int = 0o644, link: str = "",
            pax: dict[str, str] | None = None) -> bytes:  # fmt: skip
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mode, info.mtime, info.linkname = kind, size, mode, EPOCH, link
    info.pax_headers = dict(pax or {})
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


def _entry(name: str, kind: str = "reg", **fields: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, "modtime": MODTIME, **fields}


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _blob(
    items: list[tuple[bytes, bytes, dict[str, Any] | None]], toc: bytes | None = None
) -> tuple[bytes, dict[str, str]]:
    """``items``: (the tar bytes before a file's data, the data, the TOC entry or None). The data
    starts a gzip member of its own; its entry gets its offset and digests. ``toc``: the TOC's
    JSON as given (``OFFSET`` and ``DIGEST`` replaced by the first file's), else the entries'.
    The blob, and the annotations that name its TOC and size (a well-formed blob)."""
    members: list[bytes] = []
    pending = bytearray()
    entries: list[dict[str, Any]] = []
    first: tuple[int, str] | None = None

    def cut() -> None:
        if pending:
            members.append(gzip.compress(bytes(pending), mtime=0))
            pending.clear()

    for head, data, entry in items:
        pending += head
        if data:
            cut()
            at = sum(map(len, members))
            first = first or (at, _digest(data))
            if entry is not None:
                entry.setdefault("offset", at)
                entry.setdefault("digest", _digest(data))
                entry.setdefault("chunkDigest", _digest(data))
            pending += data + b"\0" * (-len(data) % 512)
        if entry is not None:
            entries.append(entry)
    cut()
    if toc is None:
        toc = json.dumps({"version": 1, "entries": entries}, separators=(",", ":")).encode()
    elif first is not None:
        toc = toc.replace(b"OFFSET", str(first[0]).encode()).replace(b"DIGEST", first[1].encode())
    toc_at = sum(map(len, members))
    tail = _header(TOC_NAME, size=len(toc)) + toc + b"\0" * (-len(toc) % 512) + b"\0" * 1024
    members.append(gzip.compress(tail, mtime=0))
    unpacked = len(gzip.decompress(b"".join(members)))
    annotations = {TOC_DIGEST_ANNOTATION: _digest(toc), UNCOMPRESSED_SIZE_ANNOTATION: str(unpacked)}
    return b"".join(members) + estargz.footer(toc_at), annotations


def _problem(blob: bytes, annotations: dict[str, str]) -> str | None:
    return problem_of(blob, annotations, block=1 << 16)


# --- the TOC as Go's encoding/json reads it ---------------------------------------------------------


def _with_key(index_name: str, key: str, value: Any) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        if index_name == "":
            doc[key] = value
            return
        for e in doc["entries"]:
            if e["name"] == index_name:
                e[key] = value

    return edit


@pytest.mark.parametrize(
    "edit",
    [
        _with_key("d/a", "Mode", 0o4777),  # Go: a setuid, world-writable d/a
        _with_key("d/a", "UID", 1234),
        _with_key("d/b", "TYPE", "symlink"),
        _with_key("", "Entries", [{"name": "d", "type": "dir", "mode": 0o777}]),  # Go: this TOC instead
    ],
    ids=["Mode", "UID", "TYPE", "Entries"],
)
def test_a_toc_key_go_matches_without_case_is_refused(edit: Any) -> None:
    """Go's ``encoding/json`` takes ``"Mode"`` (any case) for ``mode``, the later key winning: the
    snapshotter mounted this TOC's d/a as mode 4777 owned by 1234, d/b as a symbolic link. A key
    that is not one the format names exactly is refused."""
    lying, annotations = with_toc(BLOB, edit)
    assert _problem(lying, annotations) is not None


CAPABILITY = base64.b64encode(b"\x01\x00\x00\x02\xc0\x00\x00\x00" + bytes(12)).decode()


@pytest.mark.parametrize(
    "toc",
    [
        # Go decodes the second "xattrs" into the map the first made: security.capability stays.
        '{"version":1,"entries":[{"name":"a","type":"reg","size":5,"modtime":"MODTIME",'
        '"offset":OFFSET,"xattrs":{"security.capability":"CAPABILITY"},"xattrs":{},"digest":"DIGEST",'
        '"chunkDigest":"DIGEST"}]}',
        # Go decodes the second "entries" into the entries the first made: mode 6755 stays.
        '{"version":1,"entries":[{"name":"a","mode":3565,"xattrs":{"security.capability":"CAPABILITY"}}],'
        '"entries":[{"name":"a","type":"reg","size":5,"modtime":"MODTIME","offset":OFFSET,"digest":"DIGEST",'
        '"chunkDigest":"DIGEST"}]}',
    ],
    ids=["xattrs-twice", "entries-twice"],
)
def test_a_toc_that_repeats_a_key_is_refused(toc: str) -> None:
    """Python keeps the last of a repeated key; Go decodes each into the same value, merging them:
    the snapshotter mounted a (mode 0 in the tar) as a setuid file with file capabilities."""
    text = toc.replace("MODTIME", MODTIME).replace("CAPABILITY", CAPABILITY)
    blob, annotations = _blob([(_header("a", size=5, mode=0), b"hello", None)], toc=text.encode())
    assert _problem(blob, annotations) is not None


# --- names, links, duplicates ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "items",
    [
        [  # a, then a hard link named a to a: the snapshotter's getSource recurses until Go dies
            (_header("a", size=5), b"hello", _entry("a", size=5, mode=0o644)),
            (
                _header("a", kind=tarfile.LNKTYPE, link="a"),
                b"",
                _entry("a", "hardlink", linkName="a", mode=0o644),
            ),
        ],
        [  # b → a, then a → b: a loop once both names are the links
            (_header("a", size=5), b"hello", _entry("a", size=5, mode=0o644)),
            (_header("b", size=5), b"world", _entry("b", size=5, mode=0o644)),
            (
                _header("b", kind=tarfile.LNKTYPE, link="a"),
                b"",
                _entry("b", "hardlink", linkName="a", mode=0o644),
            ),
            (
                _header("a", kind=tarfile.LNKTYPE, link="b"),
                b"",
                _entry("a", "hardlink", linkName="b", mode=0o644),
            ),
        ],
        [  # a hard link to its own folder: the mounted tree is d/loop/loop/loop/…
            (_header("d", kind=tarfile.DIRTYPE, mode=0o755), b"", _entry("d", "dir", mode=0o755)),
            (
                _header("d/loop", kind=tarfile.LNKTYPE, link="d"),
                b"",
                _entry("d/loop", "hardlink", linkName="d", mode=0o644),
            ),
        ],
    ],
    ids=["self", "two-names", "folder"],
)
def test_a_hard_link_loop_is_refused(items: list[tuple[bytes, bytes, dict[str, Any] | None]]) -> None:
    """The snapshotter resolves links by name after reading every entry (the last of a name wins):
    each of these passes today and crashes its reader (fatal: stack overflow) or mounts a cycle."""
    blob, annotations = _blob(items)
    assert _problem(blob, annotations) is not None


def test_a_file_name_listed_twice_is_refused() -> None:
    """a (200 bytes in two chunks), then a again (5 bytes): every other puller unpacks "hello";
    the snapshotter keeps the first a's chunk list for the name and mounts a as "AAAAA"."""
    body = b"A" * 100 + b"B" * 100
    members = [gzip.compress(_header("a", size=200), mtime=0)]
    first = sum(map(len, members))
    members.append(gzip.compress(body[:100], mtime=0))
    second = sum(map(len, members))
    members.append(gzip.compress(body[100:] + bytes(312) + _header("a", size=5), mtime=0))
    third = sum(map(len, members))
    members.append(gzip.compress(b"hello" + bytes(507), mtime=0))
    entries = [
        _entry("a", size=200, mode=0o644, offset=first, chunkSize=100, digest=_digest(body),
               chunkDigest=_digest(body[:100])),
        {"name": "a", "type": "chunk", "offset": second, "chunkOffset": 100,
         "chunkDigest": _digest(body[100:])},
        _entry("a", size=5, mode=0o644, offset=third, digest=_digest(b"hello"),
               chunkDigest=_digest(b"hello")),
    ]  # fmt: skip
    toc = json.dumps({"version": 1, "entries": entries}).encode()
    toc_at = sum(map(len, members))
    members.append(
        gzip.compress(_header(TOC_NAME, size=len(toc)) + toc + bytes(-len(toc) % 512 + 1024), mtime=0)
    )
    annotations = {TOC_DIGEST_ANNOTATION: _digest(toc),
                   UNCOMPRESSED_SIZE_ANNOTATION: str(len(gzip.decompress(b"".join(members))))}  # fmt: skip
    assert _problem(b"".join(members) + estargz.footer(toc_at), annotations) is not None


def test_a_name_that_is_not_utf8_is_refused() -> None:
    """The tar names d/\\xff; the TOC names "d/\\udcff" (JSON's escape of the same surrogate Python
    reads the tar name as). Go's decoder makes that U+FFFD: the snapshotter mounts d/\\ufffd, every
    other puller unpacks d/\\xff (and two such names become one)."""
    toc = json.dumps({"version": 1, "entries": [_entry("d/\udcff", size=5, mode=0o644, offset=0,
                                                        digest="DIGEST", chunkDigest="DIGEST")]})  # fmt: skip
    toc = toc.replace('"offset": 0', '"offset": OFFSET')
    blob, annotations = _blob([(_header("d/\udcff", size=5), b"hello", None)], toc=toc.encode())
    assert _problem(blob, annotations) is not None


# --- the tar as Go's archive/tar reads it ------------------------------------------------------------


def test_pax_owner_records_go_reads_are_the_entrys_owner() -> None:
    """``uid=+7`` and ``gid=-3``: Go's ParseInt takes them (every other puller: uid 7, gid -3);
    ``str.isdigit`` does not, so the check fell back to the header's 0, which the TOC says."""
    blob, annotations = _blob([(_header("a", size=5, pax={"uid": "+7", "gid": "-3"}), b"hello",
                                _entry("a", size=5, mode=0o644))])  # fmt: skip
    assert _problem(blob, annotations) is not None


def test_a_pax_size_go_reads_is_the_entrys_size() -> None:
    """``size=+1024`` on an empty a: Go reads the next 1024 bytes as a's data, the check as the
    entry evil, which the TOC lists: the snapshotter mounts evil, no other puller unpacks it."""
    blob, annotations = _blob([
        (_header("a", pax={"size": "+1024"}), b"", _entry("a", mode=0o644)),
        (_header("evil", size=4), b"EVIL", _entry("evil", size=4, mode=0o644)),
    ])  # fmt: skip
    assert _problem(blob, annotations) is not None


def test_an_old_regular_file_named_as_a_folder_is_refused() -> None:
    """Type ``\\0`` named x/: Go's archive/tar makes it a folder with no data and reads the 1024
    bytes after it as entries (here: a file evil); the check took them as x's data."""
    hidden = _header("evil", size=4) + b"EVIL" + bytes(508)
    blob, annotations = _blob([(_header("x/", kind=tarfile.AREGTYPE, size=len(hidden)), hidden,
                                _entry("x/", size=len(hidden), mode=0o644))])  # fmt: skip
    assert _problem(blob, annotations) is not None


def test_gnu_sparse_records_are_refused() -> None:
    """PAX ``GNU.sparse.*``: Go's archive/tar unpacks this entry as etc/passwd holding "hello"; the
    snapshotter mounts a, 517 bytes of sparse map and data."""
    data = b"1\n0\n5\n".ljust(512, b"\0") + b"hello"
    pax = {"GNU.sparse.name": "etc/passwd", "GNU.sparse.major": "1", "GNU.sparse.minor": "0",
           "GNU.sparse.realsize": "5"}  # fmt: skip
    blob, annotations = _blob(
        [(_header("a", size=len(data), pax=pax), data, _entry("a", size=len(data), mode=0o644))]
    )
    assert _problem(blob, annotations) is not None


def test_a_star_header_prefix_is_read_as_go_reads_it() -> None:
    """A ustar header whose trailer is ``tar\\0`` (star): Go takes 131 bytes of prefix (then atime,
    ctime); the check took 155, so its name (which the TOC repeats) is not the one unpacked."""
    info = tarfile.TarInfo("f")
    info.size, info.mtime, info.mode = 5, EPOCH, 0o644
    head = bytearray(info.tobuf(tarfile.USTAR_FORMAT))
    prefix = b"A" * 131 + b"00000000000"
    head[345 : 345 + len(prefix)] = prefix
    head[508:512] = b"tar\0"
    head[148:156] = b" " * 8
    head[148:156] = b"%06o\0 " % sum(head)
    name = (prefix + b"/f").decode()
    blob, annotations = _blob([(bytes(head), b"hello", _entry(name, size=5, mode=0o644))])
    assert _problem(blob, annotations) is not None


def test_a_pax_mtime_is_the_entrys_mtime() -> None:
    """``mtime=1700000000``: every other puller sets 2023; the TOC (and the check) said 2000."""
    blob, annotations = _blob([(_header("a", size=5, pax={"mtime": "1700000000"}), b"hello",
                                _entry("a", size=5, mode=0o644))])  # fmt: skip
    assert _problem(blob, annotations) is not None


def test_our_own_layer_with_a_file_from_1969_passes() -> None:
    """The same blind spot the other way: tarfile writes mtime -1 as a PAX record (header 0), the
    writer's TOC says 1969-12-31T23:59:59Z as Go reads the tar, and the check refuses our layer."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("old")
        info.size, info.mtime = 1, -1
        tar.addfile(info, io.BytesIO(b"x"))
    made, _, blob = written(out.getvalue())
    assert _problem(blob, made.annotations()) is None


# --- never an exception ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pax",
    [{"uid": "\u00b2"}, {"gid": "1" * 5000}, {"size": "\u00b2"}, {"size": "9" * 5000}],
    ids=["uid-superscript", "gid-5000-digits", "size-superscript", "size-5000-digits"],
)
def test_a_pax_number_python_cannot_read_is_a_sentence(pax: dict[str, str]) -> None:
    """``"²".isdigit()`` is true and ``int("²")`` raises; so does int() of 5000 digits."""
    blob, annotations = _blob([(_header("a", size=5, pax=pax), b"hello", _entry("a", size=5, mode=0o644))])
    assert isinstance(_problem(blob, annotations), str)


def test_an_uncompressed_size_annotation_python_cannot_read_is_a_sentence() -> None:
    """The manifest (outside data, as served to ``mirror``) says the size is "²"."""
    annotations = {TOC_DIGEST_ANNOTATION: "sha256:" + "0" * 64, UNCOMPRESSED_SIZE_ANNOTATION: "\u00b2"}
    check = LayerCheck(annotations)
    check.feed(BLOB)
    assert isinstance(check.problem, str)


def test_a_toc_of_empty_objects_costs_no_more_memory_a_byte_than_an_honest_one() -> None:
    """An honest TOC parses to ~8 bytes of Python a byte of JSON; 8 MiB of ``{},`` (which gzip makes
    a few KB, and the 256 MiB bound allows 32 times over) to ~25: 6.4 GB at the bound."""
    toc = b'{"version":1,"entries":[' + b"{}," * ((8 << 20) // 3) + b"{}]}"
    blob, annotations = _blob([(_header("a", size=5), b"hello", _entry("a", size=5, mode=0o644))], toc=toc)
    tracemalloc.start()
    try:
        problem = _problem(blob, annotations)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert problem is not None
    assert peak < 10 * len(toc), f"{peak >> 20} MiB for a TOC of {len(toc) >> 20} MiB"


# --- the writer ---------------------------------------------------------------------------------------


def test_the_writer_refuses_a_name_that_is_not_utf8_with_a_sentence() -> None:
    """A normalized layer keeps a file named b"d\\xff" (tarfile's surrogateescape); the TOC cannot
    say it (Go would mount d\\ufffd). Today: UnicodeEncodeError at the TOC, naming no file."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("d\udcff")
        info.size, info.mtime = 1, EPOCH
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(ValueError, match="not UTF-8") as caught:
        written(out.getvalue())
    assert not isinstance(caught.value, UnicodeError)
    assert repr("d\udcff") in str(caught.value)


# --- xpu-release profile: the container's output --------------------------------------------------------


class _Container:
    def __init__(self, stdout: bytes) -> None:
        self.stdout = stdout

    def wait(self) -> dict[str, int]:
        return {"StatusCode": 0}

    def logs(self, *, stdout: bool, stderr: bool) -> bytes:
        return self.stdout if stdout else b""


def _engine(stdout: bytes) -> Engine:
    api = SimpleNamespace(remove_container=lambda name, force: None,
                          inspect_image=lambda image: {"Architecture": "amd64"})  # fmt: skip
    containers = SimpleNamespace(run=lambda *a, **k: _Container(stdout))
    return Engine(SimpleNamespace(api=api, containers=containers, info=lambda: {"Architecture": "x86_64"}))


def _spec() -> Any:
    return SimpleNamespace(pip_install="venv", base=SimpleNamespace(python="/usr/bin/python3"),
                           of_kind=lambda kind: [], evaluation=None, env={}, ref="demo:1.0",
                           image="demo", version="1.0")  # fmt: skip


def test_a_workload_that_prints_bytes_that_are_not_utf8_is_profiled() -> None:
    """The workload runs in the recorder's process: its stdout is the run's, then the list."""
    stdout = b"\xff\xfe progress bar bytes\n\n" + json.dumps(["/usr/lib/libz.so.1"]).encode() + b"\n"
    made = profile_mod.record(Path("/repo"), _spec(), _engine(stdout), "demo:1.0")
    assert made.files == ("/usr/lib/libz.so.1",)


@pytest.mark.parametrize(
    "path",
    ["/opt/app/a\nb", "/opt/app/back\\slash", "/opt/app/nbsp\u00a0name", "/opt/app/\udcff"],
    ids=["newline", "backslash", "not-printable", "not-utf8"],
)
def test_what_the_recorder_takes_the_profile_file_reads_back(tmp_path: Path, path: str) -> None:
    """``record`` takes any string starting with "/"; ``read_profile`` refuses what is not one
    printable line without a backslash and says "remake it with `xpu-release profile`", which
    makes the same file again (or ``write`` dies on the surrogate). The recorder refuses such a
    path with BuildFailed, or what it writes reads back as it recorded."""
    stdout = json.dumps(["/usr/lib/libz.so.1", path]).encode() + b"\n"
    try:
        made = profile_mod.record(tmp_path, _spec(), _engine(stdout), "demo:1.0")
    except BuildFailed:
        return
    made = profile_mod.Profile(ref=made.ref, path=tmp_path / "prefetch.txt", files=made.files)
    try:
        profile_mod.write(tmp_path, made)
        back = read_profile(made.path, "prefetch.txt")
    except ManifestError as exc:
        pytest.fail(f"the recorded profile is refused when read back: {exc}")
    assert back == made.files
