"""What the HTTP sessions take from the machine they run on (``oci/connection.py``):

- ``~/.netrc`` is never read, by the registry transport nor by an artifact download: a FIFO
  there hung every request, and an entry for a registry's host replaced the login we send;
- the environment's proxy settings still apply (``HTTP_PROXY``, ``NO_PROXY``), read once per
  origin and session;
- an artifact URL's own login (``https://user:token@host/…``) is still sent, as requests sends it;
- every answer's header deadline is kept by one watchdog thread, not a timer thread a request;
  a deadline rings once, in order, and never once it is disarmed (its answer came); one that
  fails ends no other; a forked child keeps none of its parent's."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from xpu_release.errors import ReleaseError
from xpu_release.image.fetch import fetch
from xpu_release.manifest.registries import Endpoint
from xpu_release.oci.connection import WATCHDOG, _shut, session
from xpu_release.oci.credentials import Credentials
from xpu_release.oci.registry import RegistryClient, RetryPolicy
from xpu_release.settings import Settings, use

from ..fake_registry import State, fake_registry

ONCE = RetryPolicy(attempts=1, base_delay=0.0, max_delay=0.0, timeout=5.0)
ARTIFACT = b"an artifact of the SDK\n" * 100


def client_for(host: str, state: State, policy: RetryPolicy = ONCE) -> RegistryClient:
    ep = Endpoint(registry="public", role="public", region=None, host=host, namespace="ns", insecure=True)
    return RegistryClient(ep, Credentials(username=state.username, password=state.password), policy)


def in_time(call: object, seconds: float = 20.0) -> object:
    """``call()``'s result, or a failure when it has not returned within ``seconds`` (a hang)."""
    box: list[object] = []
    worker = threading.Thread(target=lambda: box.append(call()), daemon=True)  # type: ignore[operator]
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still waiting after {seconds} s"
    return box[0] if box else None


@pytest.fixture
def netrc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home whose ``.netrc`` (also named by ``$NETRC``) the test writes."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("NETRC", str(home / ".netrc"))
    return home / ".netrc"


# --- ~/.netrc -----------------------------------------------------------------------------------


def test_a_netrc_entry_for_the_registry_never_replaces_our_login(netrc: Path) -> None:
    netrc.write_text("machine 127.0.0.1 login someone-else password not-ours\n")
    netrc.chmod(0o600)
    with fake_registry() as (host, state):
        client = client_for(host, state)
        client.ping()
        assert client.tags("ns/image") == []  # the token flow, with our login

        # Counter-check: a session of requests' own sends the netrc's login instead of ours.
        ours = Credentials(username=state.username, password=state.password).basic
        for made, status in ((session(), 200), (requests.Session(), 401)):
            with made.get(f"http://{host}/token", headers={"Authorization": ours}, timeout=5) as resp:
                assert resp.status_code == status, made


def test_a_fifo_at_netrc_hangs_no_request(netrc: Path) -> None:
    os.mkfifo(netrc)  # a reader of it waits for a writer that never comes
    with fake_registry() as (host, state):
        client = client_for(host, state)
        assert in_time(lambda: client.tags("ns/image")) == []


class _Artifacts(BaseHTTPRequestHandler):
    """Serves ARTIFACT, or redirects to ``moved_to``; keeps each request's Authorization."""

    seen: list[tuple[str, str | None]]
    moved_to: str | None = None

    def do_GET(self) -> None:
        self.seen.append((self.headers.get("Host", ""), self.headers.get("Authorization")))
        if self.moved_to:
            self.send_response(302)
            self.send_header("Location", self.moved_to)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(ARTIFACT)))
        self.end_headers()
        self.wfile.write(ARTIFACT)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def artifact_server() -> Iterator[tuple[int, list[tuple[str, str | None]]]]:
    seen: list[tuple[str, str | None]] = []
    handler = type("Handler", (_Artifacts,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()


def test_an_artifact_download_sends_our_token_and_never_a_netrc_login(
    netrc: Path, tmp_path: Path, artifact_server: tuple[int, list[tuple[str, str | None]]]
) -> None:
    port, seen = artifact_server
    netrc.write_text("machine 127.0.0.1 login someone-else password not-ours\n"
                     "machine localhost login someone-else password not-ours\n")  # fmt: skip
    netrc.chmod(0o600)
    use(Settings(cache=tmp_path / "cache"))
    sha256 = hashlib.sha256(ARTIFACT).hexdigest()

    got = fetch(f"http://127.0.0.1:{port}/sdk.tar.gz", sha256, "sdk.tar.gz", token="the-token")

    assert got.read_bytes() == ARTIFACT
    assert [auth for _, auth in seen] == ["Bearer the-token"]


def test_a_redirect_to_another_host_carries_no_login_of_ours_nor_of_netrc(
    netrc: Path, tmp_path: Path, artifact_server: tuple[int, list[tuple[str, str | None]]]
) -> None:
    port, seen = artifact_server
    netrc.write_text("machine localhost login someone-else password not-ours\n")
    netrc.chmod(0o600)
    use(Settings(cache=tmp_path / "cache"))
    first: list[tuple[str, str | None]] = []
    handler = type(
        "Moved", (_Artifacts,), {"seen": first, "moved_to": f"http://localhost:{port}/cdn/sdk.tar.gz"}
    )
    origin = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=origin.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{origin.server_address[1]}/sdk.tar.gz"
        fetch(url, hashlib.sha256(ARTIFACT).hexdigest(), "sdk.tar.gz", token="the-token")
    finally:
        origin.shutdown()
        origin.server_close()

    assert [auth for _, auth in first] == ["Bearer the-token"]  # the host it was given for
    assert seen == [(f"localhost:{port}", None)]  # another host: nothing


# --- the environment's proxies --------------------------------------------------------------------


def test_the_environments_proxy_is_used_and_no_proxy_bypasses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_registry() as (host, state):
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:1")  # a proxy that does not answer
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        with pytest.raises(ReleaseError, match="ProxyError"):
            client_for(host, state).ping()

        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        client = client_for(host, state)
        client.ping()
        assert client.tags("ns/image") == []


# --- the header deadline --------------------------------------------------------------------------


def test_many_answers_start_no_thread_each(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        started.append(type(thread).__name__)
        start(thread)

    with fake_registry() as (host, state):
        client = client_for(host, state)
        client.ping()
        monkeypatch.setattr(threading.Thread, "start", counted)
        for _ in range(200):
            assert client.blob_exists("ns/image", "sha256:" + "0" * 64) is False

    # The fake's thread for a new connection, if any, and the watchdog if this process had none.
    assert len(started) <= 2, started  # a timer a request was 200


def test_a_deadline_rings_once_when_it_comes_and_never_after_it_is_disarmed() -> None:
    rung: list[str] = []
    late = WATCHDOG.arm(0.3, lambda: rung.append("late"))
    soon = WATCHDOG.arm(0.05, lambda: rung.append("soon"))  # armed after, due first
    kept = WATCHDOG.arm(0.05, lambda: rung.append("disarmed"))
    assert kept.disarm() is False  # it had not rung
    deadline = time.monotonic() + 10
    while len(rung) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)

    assert rung == ["soon", "late"]
    assert (soon.disarm(), late.disarm()) == (True, True)  # each had rung


def test_a_deadline_whose_action_fails_ends_no_other() -> None:
    rung: list[str] = []

    def broken() -> None:
        msg = "'SSLTransport' object has no attribute 'shutdown'"
        raise AttributeError(msg)

    WATCHDOG.arm(0.01, broken)
    WATCHDOG.arm(0.05, lambda: rung.append("after"))
    deadline = time.monotonic() + 10
    while not rung and time.monotonic() < deadline:
        time.sleep(0.01)

    assert rung == ["after"]


def test_tls_through_a_proxy_is_shut_by_its_socket_underneath() -> None:
    shut: list[int] = []

    class Raw:
        def shutdown(self, how: int) -> None:
            shut.append(how)

    class Wrapped:  # urllib3's SSLTransport: no shutdown of its own
        socket = Raw()

    _shut(Wrapped())
    assert shut == [2]  # SHUT_RDWR


def test_a_forked_child_keeps_none_of_its_parents_deadlines() -> None:
    WATCHDOG.arm(60, lambda: None)  # the parent's, pending
    pid = os.fork()
    if pid == 0:  # the child: its own watchdog, empty
        os._exit(0 if not WATCHDOG._heap and WATCHDOG._thread is None else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_an_artifact_urls_own_login_is_sent(
    tmp_path: Path, artifact_server: tuple[int, list[tuple[str, str | None]]]
) -> None:
    port, seen = artifact_server
    use(Settings(cache=tmp_path / "cache"))

    fetch(f"http://user:tok@127.0.0.1:{port}/sdk.tar.gz", hashlib.sha256(ARTIFACT).hexdigest(), "sdk.tar.gz")

    assert [auth for _, auth in seen] == ["Basic dXNlcjp0b2s="]  # base64("user:tok")
