"""An in-process fake of the OCI distribution API, for testing the registry client without
Docker: manifests, blobs, chunked and monolithic uploads, tag lists with ``Link`` paging, the
bearer-token flow, and faults on demand: an expiring token, a dropped upload, a 503, and the
registry that attacks its client: one that lies about digests (``wrong_digest_header``, or other
bytes stored under a digest), truncates (``cut_blob_gets``), trickles (``trickle``: a byte at a
time), floods (``flood``: a body that never ends, or declares a terabyte), or answers the
referrers API with whatever ``referrers_body`` holds."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


@dataclass
class Faults:
    page_size: int = 100  # the most tags one page holds, whatever `n` asks
    expire_token_after_patches: int | None = None  # every token dies after this many PATCHes
    expirations: int = 1  # how many times that happens
    drop_patches: int = 0  # close the connection on this many PATCHes
    unavailable: int = 0  # answer 503 to this many requests
    realm: str | None = None  # the token realm to name (default: our own /token)
    wrong_digest_header: bool = False  # claim another Docker-Content-Digest for manifests
    # answer this many manifest PUTs as distribution does when it reads a link file another
    # writer is rewriting: 400 DIGEST_INVALID + MANIFEST_BLOB_UNKNOWN
    blob_unknown_on_put: int = 0
    cut_blob_gets: int = 0  # send half of this many blob GETs' bodies, then close the connection
    trickle: float = 0.0  # seconds between the bytes of every blob and manifest body (0: at once)
    flood: str = ""  # "blobs" or "manifests": their GETs answer with a body that never ends
    flood_declares: int | None = None  # the Content-Length a flood declares (None: none, it just goes on)
    referrers_body: bytes | None = None  # the referrers API's answer, as it is (with the API on)
    manifest_type: str | None = None  # the Content-Type every manifest is served with ("": none)
    tags_body: bytes | None = None  # every tag list's answer, as it is


@dataclass
class State:
    username: str = "u"
    password: str = "the-password"
    auth: bool = True
    faults: Faults = field(default_factory=Faults)
    blobs: dict[str, bytes] = field(default_factory=dict)
    manifests: dict[tuple[str, str], tuple[str, bytes]] = field(default_factory=dict)
    uploads: dict[str, bytearray] = field(default_factory=dict)
    tokens: set[str] = field(default_factory=set)
    token_requests: int = 0
    token_scopes: list[str] = field(default_factory=list)  # the scope each token was asked for
    patches: int = 0
    requests: list[str] = field(default_factory=list)  # authorized requests, in order
    referrers_api: bool = False  # OCI 1.1: GET /v2/<repo>/referrers/<digest>, OCI-Subject on push
    # As distribution keeps them: a blob belongs to the repositories it was pushed or mounted
    # to (HEAD/GET elsewhere is 404), and `POST ...uploads/?mount=D&from=R` mounts it (201)
    # when R holds it. Off: one store every repository sees, and no mounts.
    per_repository: bool = False
    repo_blobs: dict[str, set[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopped: threading.Event = field(default_factory=threading.Event)  # set when the fake shuts down


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _subject_of(body: bytes) -> str | None:
    """The digest a manifest's ``subject`` names (None: none, or no manifest a registry reads)."""
    try:
        subject = json.loads(body).get("subject")
        return str(subject["digest"]) if isinstance(subject, dict) else None
    except (ValueError, AttributeError, KeyError, RecursionError):
        return None


class Handler(BaseHTTPRequestHandler):
    server: _Server
    # Connections kept open between requests, as a registry's are (HTTP/1.0 opened a connection
    # and a server thread per request: some 16,000 in the engine-free tier).
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else a kept connection waits out delayed ACKs (40 ms a request)
    _consumed = False  # this request's body was read

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def end_headers(self) -> None:
        """A request whose body is left unread ends its connection (``Connection: close``):
        the body's bytes would otherwise be read as the next request."""
        sent_body = (
            self.headers.get("Content-Length", "0") not in ("", "0") or "Transfer-Encoding" in self.headers
        )
        if sent_body and not self._consumed:
            self.send_header("Connection", "close")  # and close_connection: BaseHTTPRequestHandler's
        super().end_headers()

    @property
    def state(self) -> State:
        return self.server.state

    # --- plumbing ----------------------------------------------------------------------------

    def _send(
        self, code: int, body: bytes = b"", headers: dict[str, str] | None = None, *, content: bool = False
    ) -> None:
        """An answer; ``content``: the body is a manifest's or a blob's (a trickle slows those)."""
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self._write(body, self.state.faults.trickle if content else 0.0)

    def _write(self, body: bytes, pause: float) -> None:
        """The body, at once, or a byte every ``pause`` seconds (a registry that trickles)."""
        if not pause:
            self.wfile.write(body)
            return
        for i in range(len(body)):
            if self.state.stopped.wait(pause):  # the fake is shutting down: stop trickling
                return
            try:
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
            except OSError:
                return  # the client gave up: as it should

    def _flood(self, headers: dict[str, str]) -> None:
        """A 200 whose body never ends (or declares a terabyte): zeros until the client leaves."""
        self.send_response(200)
        for k, v in headers.items():
            self.send_header(k, v)
        declared = self.state.faults.flood_declares
        if declared is not None:
            self.send_header("Content-Length", str(declared))
        self.end_headers()
        self.close_connection = True
        block = bytes(1 << 16)
        while not self.state.stopped.is_set():
            try:
                self.wfile.write(block)
            except OSError:
                return

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        self._consumed = "Transfer-Encoding" not in self.headers  # a chunked body is not read here
        return self.rfile.read(length) if length else b""

    def _authorized(self) -> bool:
        if not self.state.auth:
            return True
        got = self.headers.get("Authorization", "")
        if got.startswith("Bearer ") and got[7:] in self.state.tokens:
            return True
        host = self.headers.get("Host")
        realm = self.state.faults.realm or f"http://{host}/token"
        self._send(401, b"{}", {"WWW-Authenticate": f'Bearer realm="{realm}",service="fake"'})
        return False

    def _token(self) -> None:
        self.state.token_requests += 1
        self.state.token_scopes += parse_qs(urlparse(self.path).query).get("scope", [""])
        expected = base64.b64encode(f"{self.state.username}:{self.state.password}".encode()).decode()
        if self.headers.get("Authorization") != f"Basic {expected}":
            self._send(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}')
            return
        token = uuid.uuid4().hex
        self.state.tokens.add(token)
        self._send(200, json.dumps({"token": token}).encode(), {"Content-Type": "application/json"})

    def _route(self) -> None:
        self._consumed = False
        url = urlparse(self.path)
        if url.path == "/token":
            self._token()
            return
        faults = self.state.faults
        if faults.unavailable > 0:
            faults.unavailable -= 1
            self._body()
            self._send(503, b"busy", {"Retry-After": "0"})
            return
        if not self._authorized():
            self._body()
            return
        self.state.requests.append(f"{self.command} {url.path}")  # what was let through
        if url.path == "/v2/":
            self._send(200, b"{}")
            return
        m = re.fullmatch(r"/v2/(?P<repo>.+)/referrers/(?P<digest>sha256:[0-9a-f]{64})", url.path)
        if m and self.state.referrers_api:
            self._referrers(m["repo"], m["digest"])
            return
        m = re.fullmatch(r"/v2/(?P<repo>.+)/(?P<kind>manifests|blobs|tags)/(?P<rest>.*)", url.path)
        if not m:
            self._send(404)
            return
        repo, kind, rest = m["repo"], m["kind"], m["rest"]
        query = parse_qs(url.query)
        if kind == "tags":
            self._tags(repo, query)
        elif kind == "manifests":
            self._manifest(repo, rest)
        elif rest.startswith("uploads/"):
            self._upload(repo, rest.removeprefix("uploads/"), query)
        else:
            self._blob(rest, repo)

    do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _route

    # --- API ---------------------------------------------------------------------------------

    def _tags(self, repo: str, query: dict[str, list[str]]) -> None:
        if self.state.faults.tags_body is not None:
            self._send(200, self.state.faults.tags_body, {"Content-Type": "application/json"})
            return
        tags = sorted(tag for (r, tag) in self.state.manifests if r == repo and not tag.startswith("sha256:"))
        n = min(int(query.get("n", ["1000"])[0]), self.state.faults.page_size)
        last = query.get("last", [""])[0]
        rest = [t for t in tags if t > last]
        page = rest[:n]
        headers = {"Content-Type": "application/json"}
        if len(rest) > n:
            headers["Link"] = f'</v2/{repo}/tags/list?n={n}&last={page[-1]}>; rel="next"'
        self._send(200, json.dumps({"name": repo, "tags": page}).encode(), headers)

    def _manifest(self, repo: str, ref: str) -> None:
        if self.command == "PUT" and self.state.faults.blob_unknown_on_put > 0:
            self.state.faults.blob_unknown_on_put -= 1
            body = self._body()
            errors = [{"code": "DIGEST_INVALID", "message": "provided digest did not match uploaded content"},
                      {"code": "MANIFEST_BLOB_UNKNOWN", "message": "blob unknown to registry"}]  # fmt: skip
            self._send(400, json.dumps({"errors": errors}).encode(), {"Content-Type": "application/json"})
            return
        if self.command == "PUT":
            body = self._body()
            media = self.headers.get("Content-Type", "")
            digest = digest_of(body)
            self.state.manifests[(repo, ref)] = (media, body)
            self.state.manifests[(repo, digest)] = (media, body)
            headers = {"Docker-Content-Digest": digest}
            subject = _subject_of(body)
            if subject and self.state.referrers_api:
                headers["OCI-Subject"] = subject
            self._send(201, headers=headers)
            return
        found = self.state.manifests.get((repo, ref))
        if found is None:
            self._send(404)
            return
        media, body = found
        faults = self.state.faults
        media = media if faults.manifest_type is None else faults.manifest_type
        headers = {"Content-Type": media} if media else {}
        if self.command == "GET" and faults.flood == "manifests":
            self._flood(headers)
            return
        claimed = "sha256:" + "0" * 64 if faults.wrong_digest_header else digest_of(body)
        self._send(200, body, {**headers, "Docker-Content-Digest": claimed}, content=True)

    def _referrers(self, repo: str, digest: str) -> None:
        if self.state.faults.referrers_body is not None:
            self._send(200, self.state.faults.referrers_body,
                       {"Content-Type": "application/vnd.oci.image.index.v1+json"})  # fmt: skip
            return
        found = {}
        for (r, ref), (media, body) in self.state.manifests.items():
            if r == repo and ref.startswith("sha256:") and _subject_of(body) == digest:
                data = json.loads(body)
                found[ref] = {"mediaType": media, "digest": ref, "size": len(body),
                              "artifactType": data.get("artifactType", ""),
                              "annotations": data.get("annotations", {})}  # fmt: skip
        index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                 "manifests": [found[k] for k in sorted(found)]}  # fmt: skip
        self._send(
            200, json.dumps(index).encode(), {"Content-Type": "application/vnd.oci.image.index.v1+json"}
        )

    def _blob(self, digest: str, repo: str) -> None:
        data = self.state.blobs.get(digest)
        if self.state.per_repository and digest not in self.state.repo_blobs.get(repo, set()):
            data = None
        if data is None:
            self._send(404)
        elif self.command == "GET" and self.state.faults.flood == "blobs":
            self._flood({"Docker-Content-Digest": digest})
        elif self.command == "GET" and self.state.faults.cut_blob_gets > 0:
            self.state.faults.cut_blob_gets -= 1
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.close_connection = True
        else:
            self._send(200, data, {"Docker-Content-Digest": digest}, content=True)

    def _upload(self, repo: str, session: str, query: dict[str, list[str]]) -> None:
        if self.command == "POST":
            mount, source = query.get("mount", [""])[0], query.get("from", [""])[0]
            if self.state.per_repository and mount in self.state.repo_blobs.get(source, set()):
                self.state.repo_blobs.setdefault(repo, set()).add(mount)
                self._send(
                    201, headers={"Location": f"/v2/{repo}/blobs/{mount}", "Docker-Content-Digest": mount}
                )
                return
            sid = uuid.uuid4().hex
            self.state.uploads[sid] = bytearray()
            self._send(202, headers={"Location": f"/v2/{repo}/blobs/uploads/{sid}"})
            return
        buf = self.state.uploads.get(session)
        if buf is None:
            self._body()
            self._send(404)
            return
        if self.command == "DELETE":  # the client gives up a session (a mount it did not get)
            del self.state.uploads[session]
            self._send(204)
            return
        if self.command == "PATCH":
            faults = self.state.faults
            if faults.drop_patches > 0:
                faults.drop_patches -= 1
                self.close_connection = True
                self.connection.close()
                return
            buf.extend(self._body())
            self.state.patches += 1
            expire = faults.expire_token_after_patches
            if expire is not None and faults.expirations > 0 and self.state.patches % expire == 0:
                faults.expirations -= 1
                self.state.tokens.clear()  # every token issued so far has now expired
            self._send(202, headers={"Location": f"/v2/{repo}/blobs/uploads/{session}"})
            return
        if self.command == "PUT":
            buf.extend(self._body())
            want = query.get("digest", [""])[0]
            if digest_of(bytes(buf)) != want:
                self._send(400, b'{"errors":[{"code":"DIGEST_INVALID"}]}')
                return
            self.state.blobs[want] = bytes(buf)
            self.state.repo_blobs.setdefault(repo, set()).add(want)
            del self.state.uploads[session]
            self._send(201, headers={"Docker-Content-Digest": want})
            return
        self._send(405)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: State) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.state = state


@contextmanager
def fake_registry(state: State | None = None) -> Iterator[tuple[str, State]]:
    """``host:port`` of a running fake, and its state to arrange and inspect."""
    st = state or State()
    server = _Server(st)
    # Polled often, so that a test's registry stops at once when the test ends.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", st
    finally:
        st.stopped.set()  # a trickle or a flood still running ends now
        server.shutdown()
        server.server_close()
