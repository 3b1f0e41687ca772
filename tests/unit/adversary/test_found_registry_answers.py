"""A registry's answer below the body: its headers, its redirects, its error text. The guarded
layer bounds bodies (size, deadline, minimum rate), but the status line and the headers are read
by http.client with the socket's timeout alone; a redirect's target is followed wherever it
points; an error body is shown with only the password itself redacted.

docs/using/outside-data.md: "A registry that gives no answer at all (no connection, after the
retries) is exit 10; one that answers wrongly or too slowly is exit 7."
docs/using/registries.md: "Every secret is redacted from messages and JSON."
docs/reference/exit-codes.md: 70 is only ever a bug of ours."""

from __future__ import annotations

import base64
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from xpu_release.errors import WireError
from xpu_release.guard.bodies import Pace
from xpu_release.oci.endpoint import Endpoint
from xpu_release.oci.registry import RegistryClient, RetryPolicy

from ..cli.hostile import REF, REPO, a_users_error, invoke, layout, registries_for
from .evil_registry import Handler, evil_registry
from .proc import a_users_error_of, run_cli

USER, PASSWORD = "u", "the-password"
QUICK = Pace(min_rate=1000, window=0.3, deadline=2.0)


def _mirror(repo: Path, tmp_path: Path, host: str, stopped: threading.Event, **env: str) -> Any:
    """``mirror REF --from HOST/REPO --to oci:…`` with the registry at ``host`` as the release's
    public endpoint (so the release's login goes to it)."""
    argv = ["--registries", str(registries_for(tmp_path, host)), "mirror", REF,
            "--from", f"{host}/{REPO}", "--to", f"oci:{tmp_path / 'target'}"]  # fmt: skip
    return invoke(repo, argv, env={"XPU_RELEASE_CACHE": str(tmp_path / "cache"), **env},
                  unstick=stopped.set)  # fmt: skip


# --- secrets ----------------------------------------------------------------------------------


def _echoes_authorization(h: Handler) -> None:
    """Basic auth asked for; then every request refused with a 400 whose text quotes the request's
    Authorization header (as some proxies' and WAFs' error pages do)."""
    got = h.headers.get("Authorization")
    if got is None:
        h.send(401, headers={"WWW-Authenticate": 'Basic realm="registry"'})
    else:
        h.send(400, f"bad request; you sent Authorization: {got}".encode())


def _echoes_bearer(h: Handler) -> None:
    """A token service at /token; every other request with the token refused with a 400 quoting
    the request's Authorization header."""
    got = h.headers.get("Authorization", "")
    if h.path.startswith("/token"):
        h.send(200, b'{"token": "TOKEN-0123456789abcdef"}', {"Content-Type": "application/json"})
    elif not got.startswith("Bearer "):
        realm = f"http://{h.headers['Host']}/token"
        h.send(401, headers={"WWW-Authenticate": f'Bearer realm="{realm}",service="registry"'})
    else:
        h.send(400, f"bad request; you sent Authorization: {got}".encode())


BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
TOKEN = "TOKEN-0123456789abcdef"


@pytest.mark.parametrize(
    ("answer", "secret"),
    [(_echoes_authorization, BASIC), (_echoes_bearer, TOKEN)],
    ids=["the basic login", "the bearer token"],
)
def test_a_registry_that_echoes_our_authorization_does_not_put_it_in_the_log(
    repo: Path, tmp_path: Path, answer: Any, secret: str
) -> None:
    with evil_registry(answer) as (host, stopped):
        result = _mirror(repo, tmp_path, host, stopped,
                         XPU_RELEASE_USERNAME=USER, XPU_RELEASE_PASSWORD=PASSWORD)  # fmt: skip

    a_users_error(result, 7)
    assert secret not in result.output, result.output  # today: "…you sent Authorization: Basic dTp0…"


# --- redirects --------------------------------------------------------------------------------


def _redirects_to(location: str) -> Any:
    return lambda h: h.send(302, headers={"Location": location})


@pytest.mark.parametrize(
    "location",
    ["file:///etc/passwd", "ftp://127.0.0.1/blob", "/v2/again/and/again/{n}"],
    ids=["to file://", "to ftp://", "for ever"],
)
def test_a_redirect_we_cannot_follow_is_exit_7_and_says_so(repo: Path, tmp_path: Path, location: str) -> None:
    counter = iter(range(1000))

    def answer(h: Handler) -> None:
        h.send(302, headers={"Location": location.format(n=next(counter))})

    with evil_registry(answer) as (host, stopped):
        result = _mirror(repo, tmp_path, host, stopped)

    a_users_error(result, 7)
    # today: "…: the ca_file True cannot be read as a CA bundle; check ca_file in the registries file"
    assert "ca_file" not in result.stderr, result.stderr


def test_a_redirect_to_a_malformed_url_is_no_internal_error(repo: Path, tmp_path: Path) -> None:
    with evil_registry(_redirects_to("http://[::1")) as (host, stopped):
        result = _mirror(repo, tmp_path, host, stopped)

    a_users_error(result, 7)  # today: exit 70, ValueError: Invalid IPv6 URL


# --- answers that are no HTTP ------------------------------------------------------------------


def _many_headers(h: Handler) -> None:
    h.send(200, headers={f"X-{i}": "v" for i in range(200)})  # http.client reads at most 100


def _status_line(line: bytes) -> Any:
    def answer(h: Handler) -> None:
        h.wfile.write(line + b"\r\nContent-Length: 0\r\n\r\n")
        h.close_connection = True

    return answer


@pytest.mark.parametrize(
    "answer",
    [_many_headers, _status_line(b"HTTP/1.1 99999999999 Whatever"), _status_line(b"\x00\xff not http")],
    ids=["200 headers", "a status of 11 digits", "no status line"],
)
def test_a_registry_that_answers_garbage_is_exit_7_not_unreachable(
    repo: Path, tmp_path: Path, answer: Any
) -> None:
    with evil_registry(answer) as (host, stopped):
        result = _mirror(repo, tmp_path, host, stopped)

    # today: exit 10, "failed after 3 attempts (ConnectionError): the registry does not answer;
    # check the host name and the network": it answered, wrongly
    a_users_error(result, 7)
    assert "does not answer" not in result.stderr


# --- headers that trickle -------------------------------------------------------------------


def _trickles_headers(h: Handler) -> None:
    """A status line, then a header one byte every 0.1 s, for ever (each byte resets the
    socket's timeout; no body is ever reached, so the body's minimum rate never applies)."""
    h.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    h.wfile.flush()
    while not h.stopped.wait(0.1):
        h.wfile.write(b"a")
        h.wfile.flush()


def test_headers_that_trickle_are_stopped_like_a_body_that_trickles() -> None:
    box: dict[str, BaseException] = {}
    with evil_registry(_trickles_headers) as (host, stopped):
        ep = Endpoint(registry="public", role="public", region=None, host=host, namespace="ns", insecure=True)
        policy = RetryPolicy(attempts=1, base_delay=0.0, max_delay=0.0, timeout=1.0, pace=QUICK)
        client = RegistryClient(ep, None, policy)

        def get() -> None:
            try:
                client.get_manifest("ns/image", "1.0")
            except BaseException as exc:  # handed to the test
                box["error"] = exc

        worker = threading.Thread(target=get, daemon=True)
        worker.start()
        worker.join(15)  # the pace's deadline is 2 s, the socket's timeout 1 s (ten header bytes)
        hung = worker.is_alive()
        stopped.set()  # the answer ends: the worker sees its end
        worker.join(10)

    assert not hung, "a registry sending a header byte every 0.1 s holds the client past 15 s"
    assert isinstance(box.get("error"), WireError), box


# --- the registries file's ca_file, and a --to that names no host ------------------------------


def test_a_ca_file_that_is_a_fifo_is_never_waited_on(repo: Path, tmp_path: Path) -> None:
    # outside-data.md: "A FIFO, socket or device is never opened for reading (it would hang the
    # run)". requests opens ca_file (ssl's load_verify_locations) once the TCP connection is up.
    fifo = tmp_path / "ca.crt"
    os.mkfifo(fifo)
    registries = tmp_path / "registries.yaml"
    with evil_registry(lambda h: h.send(200)) as (host, _):
        registries.write_text(
            "registries:\n"
            f"  public: {{host: '{host}', ca_file: '{fifo}'}}\n"
            "  hub: {host: '127.0.0.1:1', insecure: true}\n"
            "  vpc: {hosts: {cn-beijing: '127.0.0.1:1', cn-wulanchabu: '127.0.0.1:1'}, insecure: true}\n"
        )
        ran = run_cli(
            repo, ["--registries", str(registries), "mirror", REF, "--to", f"oci:{tmp_path / 'out'}"]
        )

    a_users_error_of(ran)  # today: still running at the deadline, blocked opening the FIFO


@pytest.mark.parametrize("to", ["127.0.0.1:99999/x", "host with space/x"], ids=["port 99999", "a space"])
def test_a_target_host_that_is_no_host_is_a_usage_error_not_a_ca_file(
    repo: Path, tmp_path: Path, to: str
) -> None:
    source = tmp_path / "source"
    layout(source)

    result = invoke(repo, ["mirror", REF, "--from", f"oci:{source}", "--to", to],
                    env={"XPU_RELEASE_CACHE": str(tmp_path / "cache")})  # fmt: skip

    a_users_error(result)
    # today: exit 7, "mirror (127.0.0.1:99999): the ca_file True cannot be read as a CA bundle"
    assert "ca_file" not in result.stderr, result.stderr
    assert result.exit_code in (2, 3), result.stderr


# --- an upload's Location on another host ------------------------------------------------------


def test_an_upload_location_on_another_host_never_gets_our_login(repo: Path, tmp_path: Path) -> None:
    # registries.md: "A login given this way goes only to the release's public and VPC hosts";
    # "Credentials never travel over plain HTTP beyond loopback". requests' session.auth (basic)
    # and with_token (bearer) go with every request of the session, to whatever URL the
    # registry's Location names.
    seen: list[str] = []

    def elsewhere(h: Handler) -> None:
        seen.append(h.headers.get("Authorization") or "")
        h.send(500)

    source = tmp_path / "source"
    layout(source)
    with evil_registry(elsewhere, "127.0.0.2") as (other, _):

        def registry(h: Handler) -> None:
            if not h.headers.get("Authorization"):
                h.send(401, headers={"WWW-Authenticate": 'Basic realm="registry"'})
            elif h.command == "POST" and "/blobs/uploads/" in h.path:
                h.send(202, headers={"Location": f"http://{other}/upload/1"})
            else:
                h.send(404)

        with evil_registry(registry) as (host, stopped):
            argv = ["--registries", str(registries_for(tmp_path, host)), "mirror", REF,
                    "--from", f"oci:{source}", "--to", f"{host}/{REPO}"]  # fmt: skip
            result = invoke(repo, argv, env={"XPU_RELEASE_CACHE": str(tmp_path / "cache"),
                                             "XPU_RELEASE_USERNAME": USER, "XPU_RELEASE_PASSWORD": PASSWORD},
                            unstick=stopped.set)  # fmt: skip

    a_users_error(result, 7)
    assert not [a for a in seen if BASIC in a], f"{other} (not the registry) got our login: {seen[:1]}"


# --- a Content-Length that is no number --------------------------------------------------------


@pytest.mark.parametrize("length", [b"\xb2", b"2, 3"], ids=["a superscript two", "two lengths"])
def test_a_content_length_that_is_no_number_is_exit_7(repo: Path, tmp_path: Path, length: bytes) -> None:
    # guard.bodies.declared_length takes str.isdigit() for a number: "²" (0xB2, read as
    # latin-1) is a digit to isdigit and no number to int(): ValueError, exit 70. "2, 3" is
    # urllib3's InvalidHeader, a RequestException, told as an unreadable ca_file.
    def answer(h: Handler) -> None:
        h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\n"
                      b"Content-Length: " + length + b"\r\nConnection: close\r\n\r\n{}")  # fmt: skip
        h.close_connection = True

    with evil_registry(answer) as (host, stopped):
        result = _mirror(repo, tmp_path, host, stopped)

    a_users_error(result, 7)  # today: exit 70 (ValueError: invalid literal for int(): '²'); 7 naming ca_file
    assert "ca_file" not in result.stderr, result.stderr
