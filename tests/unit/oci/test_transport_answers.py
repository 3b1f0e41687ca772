"""A registry's answer below its body, as the transport tells it (docs/using/outside-data.md): an
answer that is not HTTP is a wrong answer (exit 7), never "does not answer" (10); a redirect we
cannot follow, or one that never ends, is named; headers are read by scans that move forward
only; a ``ca_file`` is read through the guard (never a FIFO waited on); a tag list that pages
for ever ends."""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xpu_release.errors import TLSVerifyFailed, WireError
from xpu_release.guard import limits
from xpu_release.oci.auth import Challenge
from xpu_release.oci.endpoint import Endpoint
from xpu_release.oci.registry import RegistryClient, RetryPolicy
from xpu_release.oci.tags import _next_link

from ...conftest import examples
from ..adversary.evil_registry import Handler, evil_registry

ONCE = RetryPolicy(attempts=1, base_delay=0.0, max_delay=0.0, timeout=5.0)


def client(host: str, **endpoint: object) -> RegistryClient:
    fields: dict[str, object] = {"insecure": True, **endpoint}
    ep = Endpoint(registry="public", role="public", region=None, host=host, namespace="ns", **fields)  # type: ignore[arg-type]
    return RegistryClient(ep, None, ONCE)


# --- answers that are not HTTP -------------------------------------------------------------------


class _Answers:
    """A server whose every answer is ``raw`` (bytes written as they are, then closed)."""

    raw = b""

    def __call__(self, h: Handler) -> None:
        h.wfile.write(self.raw)
        h.close_connection = True


_ANSWERS = _Answers()


@pytest.fixture(scope="module")
def garbage_host() -> object:
    with evil_registry(_ANSWERS) as (host, _):
        yield host


_STATUS_LINES = st.builds(lambda s: b"HTTP/1.1 " + s + b"\r\n\r\n", st.binary(max_size=40))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=examples(60))
@given(st.binary(max_size=300) | _STATUS_LINES)
def test_an_answer_that_is_not_http_is_a_wrong_answer_never_a_silent_one(
    garbage_host: str, raw: bytes
) -> None:
    _ANSWERS.raw = raw
    failed: WireError | None = None
    try:
        client(garbage_host).ping()
    except WireError as exc:
        failed = exc

    # A server that closed without a byte did not answer; any other byte is an answer (or,
    # should the bytes happen to be HTTP, a 200).
    assert failed is not None or raw.startswith(b"HTTP/")
    assert failed is None or failed.unanswered == (raw == b""), (raw, failed.message)


def test_a_connection_refused_is_a_registry_that_does_not_answer() -> None:
    with evil_registry(lambda h: h.send(200)) as (host, _):
        pass  # stopped: its port now refuses
    with pytest.raises(WireError) as refused:
        client(host).ping()

    assert refused.value.unanswered


# --- redirects -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "said"),
    [("file:///etc/passwd", "no http or https URL"), ("ftp://127.0.0.1/x", "no http or https URL"),
     ("http://[::1", "no http or https URL"), ("http://127.0.0.1:99999/x", "no http or https URL")],
)  # fmt: skip
def test_a_redirect_we_cannot_follow_is_named(location: str, said: str) -> None:
    answer = lambda h: h.send(302, headers={"Location": location})  # noqa: E731
    with evil_registry(answer) as (host, _), pytest.raises(WireError) as refused:
        client(host).ping()

    assert said in refused.value.message
    assert not refused.value.unanswered


def test_a_redirect_that_never_ends_is_stopped_after_a_few() -> None:
    count = itertools.count()

    def answer(h: Handler) -> None:
        h.send(302, headers={"Location": f"/v2/again/{next(count)}"})

    with evil_registry(answer) as (host, _), pytest.raises(WireError) as refused:
        client(host).ping()

    assert f"more than {limits.MAX_REDIRECTS} times" in refused.value.message
    assert next(count) == limits.MAX_REDIRECTS + 1


# --- headers are read forward only ---------------------------------------------------------------

_PIECES = st.lists(st.sampled_from(["<", ">", ";", " ", '"', "\\", "=", ",", "a", "rel", "next", "Bearer "]),
                   min_size=1, max_size=6)  # fmt: skip


@given(_PIECES)
def test_reading_a_header_takes_time_linear_in_its_length(pieces: list[str]) -> None:
    unit = "".join(pieces)
    header = (unit * (65_000 // len(unit) + 1))[:65_000]  # http.client's longest header line
    start = time.thread_time()  # CPU, not wall: a loaded machine's waits are not the reader's

    Challenge.read(header)
    _next_link(header)

    assert time.thread_time() - start < 1.0, f"{unit!r} repeated to 64 KB"


def test_a_challenge_is_read_as_the_rfc_writes_it() -> None:
    got = Challenge.read(
        'Bearer realm="https://auth.example/token",service="reg",scope="repository:a:pull,push"'
    )

    assert got.scheme == "bearer"
    assert got.params == {"realm": "https://auth.example/token", "service": "reg",
                          "scope": "repository:a:pull,push"}  # fmt: skip
    assert Challenge.read('Basic realm="r\\"x"').params == {"realm": 'r"x'}
    assert _next_link('</v2/a/tags/list?last=b>; rel="prev", </v2/a/tags/list?last=c>; rel="next"') == (
        "/v2/a/tags/list?last=c"
    )


# --- the ca_file ---------------------------------------------------------------------------------


def _kinds(folder: Path) -> dict[str, tuple[Path, str]]:
    fifo = folder / "fifo.crt"
    os.mkfifo(fifo)
    (folder / "dir.crt").mkdir()
    (folder / "text.crt").write_text("not a certificate\n")
    big = folder / "big.crt"
    with big.open("wb") as f:
        f.truncate(limits.MAX_CA_BYTES + 1)
    return {
        "a FIFO": (fifo, "FIFO, socket or device"),
        "a folder": (folder / "dir.crt", "is a directory"),
        "missing": (folder / "none.crt", "no such file"),
        "no certificate": (folder / "text.crt", "holds no PEM certificate"),
        "too large": (big, f"the limit is {limits.MAX_CA_BYTES}"),
    }


@pytest.mark.parametrize("kind", ["a FIFO", "a folder", "missing", "no certificate", "too large"])
def test_a_ca_file_that_is_no_bundle_is_named_and_never_waited_on(tmp_path: Path, kind: str) -> None:
    path, said = _kinds(tmp_path)[kind]
    box: dict[str, BaseException] = {}

    def ping() -> None:
        try:
            client("127.0.0.1:1", insecure=False, ca_file=str(path)).ping()
        except BaseException as exc:  # handed to the test
            box["error"] = exc

    worker = threading.Thread(target=ping, daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # the reader of the FIFO ends
        pytest.fail(f"a ca_file that is {kind} holds the client")

    error = box.get("error")
    assert isinstance(error, TLSVerifyFailed), error
    assert said in error.message
    assert str(path) in error.message


# --- a tag list that pages for ever --------------------------------------------------------------


@pytest.mark.parametrize("per_page", [0, 1], ids=["empty pages", "the same tag each page"])
def test_a_tag_list_whose_pages_bring_nothing_new_ends_at_the_first(per_page: int) -> None:
    pages = itertools.count()

    def answer(h: Handler) -> None:
        link = f'</v2/ns/x/tags/list?n=1000&last=p{next(pages)}>; rel="next"'
        body = json.dumps({"tags": ["1.0"] * per_page}).encode()
        h.send(200, body, {"Content-Type": "application/json", "Link": link})

    with evil_registry(answer) as (host, _), pytest.raises(WireError) as refused:
        client(host).tags("ns/x")

    assert "brought no new tag yet names a next page" in refused.value.message
    assert next(pages) == 1 + per_page


def test_a_tag_list_of_one_new_tag_a_page_ends_at_the_page_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_TAG_PAGES", 20)
    pages = itertools.count()

    def answer(h: Handler) -> None:
        n = next(pages)
        link = f'</v2/ns/x/tags/list?n=1000&last=t{n}>; rel="next"'
        body = json.dumps({"tags": [f"t{n}"]}).encode()
        h.send(200, body, {"Content-Type": "application/json", "Link": link})

    with evil_registry(answer) as (host, _), pytest.raises(WireError) as refused:
        client(host).tags("ns/x")

    assert "more than 20 pages" in refused.value.message
    assert next(pages) == 20


def test_the_tags_of_several_pages_come_each_once_in_order() -> None:
    pages = {"": (["a", "b"], "p2"), "p2": (["b", "c"], "p3"), "p3": (["d"], "")}

    def answer(h: Handler) -> None:
        tags, after = pages[h.path.partition("last=")[2]]
        link = {"Link": f'</v2/ns/x/tags/list?n=1000&last={after}>; rel="next"'} if after else {}
        h.send(200, json.dumps({"tags": tags}).encode(), {"Content-Type": "application/json", **link})

    with evil_registry(answer) as (host, _):
        assert client(host).tags("ns/x") == ["a", "b", "c", "d"]
