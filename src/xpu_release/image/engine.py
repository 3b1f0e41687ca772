"""The one adapter to the Docker engine (docker-py): build, inspect, tag, push, run.

docker-py reports build and push failures *inside* the JSON stream of an HTTP 200 answer, so
every stream line is checked for ``error``/``errorDetail`` and turned into a typed error that
keeps the full log. Containers are context managers: uuid-named, labelled, always removed.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import (
    BuildFailed,
    ConfigError,
    NotFoundError,
    PublishError,
    RegistryAuthError,
    ReleaseError,
    SmokeTestFailed,
    StackError,
)
from ..guard.shown import shown
from ..progress import Sink
from ..secrets import redact
from .bounded import CONTAINER_LABEL as CONTAINER_LABEL  # every throwaway container carries it
from .bounded import EMULATED_MASKS as EMULATED_MASKS  # what an emulated container gets
from .bounded import Sight, engine_said, throwaway

LineSink = Sink  # the one progress type (progress.py)


@dataclass(frozen=True, kw_only=True)
class ImageInfo:
    id: str
    tags: tuple[str, ...]
    labels: dict[str, str]
    size: int
    repo_digests: tuple[str, ...]
    env: tuple[str, ...]

    @classmethod
    def from_attrs(cls, attrs: dict[str, Any]) -> ImageInfo:
        config = attrs.get("Config") or {}
        return cls(
            id=attrs["Id"],
            tags=tuple(attrs.get("RepoTags") or ()),
            labels=dict(config.get("Labels") or {}),
            size=int(attrs.get("Size") or 0),
            repo_digests=tuple(attrs.get("RepoDigests") or ()),
            env=tuple(config.get("Env") or ()),
        )


def _context_unsent(name: str, context: Path, exc: OSError) -> str:
    """Why the build context never reached the engine: Docker's client says "Can not read file
    in context" of whatever failed as it wrote the context's tar (most often a full disk), and
    hides the cause one exception down."""
    cause = exc.__context__ if isinstance(exc.__context__, OSError) else exc
    tmp = tempfile.gettempdir()
    free = shutil.disk_usage(tmp).free / 1e9
    return (
        f"build of {name}: its context ({context}) could not be sent to the engine: {cause}; "
        f"Docker's client writes it to {tmp} first as one tar ({free:.1f} GB free there): free "
        "space, or set TMPDIR to a folder with room"
    )


def _stream_error(chunk: dict[str, Any]) -> str | None:
    """The error an engine stream line reports (in an HTTP 200 answer), redacted; else None."""
    if "error" not in chunk and "errorDetail" not in chunk:
        return None
    detail = chunk.get("errorDetail") or {}
    return redact(str(detail.get("message") or chunk.get("error") or "unknown error"))


class Engine:
    def __init__(self, client: Any) -> None:
        self.client = client
        self.api = client.api
        self.sight = Sight(client)  # the engine's architecture, asked once

    @classmethod
    def connect(cls) -> Engine:
        import docker
        from docker.errors import DockerException
        from docker.utils import parse_host

        from ..settings import current

        docker_env = dict(current().docker)
        given = docker_env.get("DOCKER_HOST")
        where = given or "the default socket"
        shown = where if len(where) <= 120 else where[:117] + "..."
        if given:
            try:
                parse_host(given)
            except (DockerException, ValueError) as exc:  # a malformed setting, not a down engine
                said = f"{type(exc).__name__}: {str(exc)[:120]}"
                msg = f"DOCKER_HOST {shown!r} is not an engine address ({said}); fix or unset it"
                raise ConfigError(msg) from None
        try:
            client = docker.from_env(version="auto", timeout=600, environment=docker_env)
            client.ping()
        except (DockerException, ValueError) as exc:
            msg = (
                f"no Docker engine answers at {shown} ({type(exc).__name__}); "
                'start one with: ci/local-stack.sh up && eval "$(ci/local-stack.sh env)"'
            )
            raise StackError(msg) from None
        return cls(client)

    # --- images --------------------------------------------------------------------------

    def build(
        self,
        *,
        context: Path,
        tag: str,
        buildargs: dict[str, str],
        labels: dict[str, str],
        on_line: LineSink,
        nocache: bool = False,
        name: str | None = None,
    ) -> str:
        """Build ``context`` with no network in build containers; return the image id.
        ``name``: what messages call the image (default: ``tag``)."""
        name = name or tag
        log: list[str] = []
        image_id = ""
        try:
            stream = self.api.build(
                path=str(context),
                tag=tag,
                buildargs=buildargs,
                labels=labels,
                rm=True,
                forcerm=True,
                network_mode="none",
                decode=True,
                pull=False,
                nocache=nocache,
            )
        except OSError as exc:  # Docker's client tars the context into a temporary file first
            raise BuildFailed(_context_unsent(name, context, exc)) from None
        for chunk in stream:
            if "stream" in chunk:
                text = redact(chunk["stream"])
                log.append(text)
                for line in text.splitlines():
                    if line.strip():
                        on_line(line)
            message = _stream_error(chunk)
            if message is not None:
                log.append(message + "\n")
                msg = f"build of {name} failed: {message}"
                raise BuildFailed(msg, details="".join(log))
            aux = chunk.get("aux") or {}
            if "ID" in aux:
                image_id = aux["ID"]
        if not image_id:
            info = self.image(tag)
            if info is None:
                msg = f"build of {name} produced no image"
                raise BuildFailed(msg, details="".join(log))
            image_id = info.id
        return image_id

    def image(self, ref: str) -> ImageInfo | None:
        from docker.errors import ImageNotFound

        try:
            return ImageInfo.from_attrs(self.api.inspect_image(ref))
        except ImageNotFound:
            return None

    def require_image(self, ref: str) -> ImageInfo:
        info = self.image(ref)
        if info is None:
            msg = f"no image {ref} in the engine; run `xpu-release build {ref}` first"
            raise NotFoundError(msg)
        return info

    def history(self, ref: str) -> list[str]:
        return [str(h.get("CreatedBy") or "") for h in self.api.history(ref)]

    def inspect_raw(self, ref: str) -> dict[str, Any]:
        return self.api.inspect_image(ref)  # type: ignore[no-any-return]

    def tag(self, image_id: str, ref: str) -> None:
        repo, _, tag = ref.rpartition(":")
        self.api.tag(image_id, repo, tag, force=True)

    def pull(self, ref: str, auth: dict[str, str] | None = None) -> None:
        # ``repo@sha256:…`` pulls by digest (the API takes a digest as the tag).
        from docker.errors import APIError

        repo, _, tag = ref.partition("@") if "@" in ref else ref.rpartition(":")
        try:
            stream = self.api.pull(repo, tag=tag, stream=True, decode=True, auth_config=auth)
        except APIError as exc:  # refused before any stream starts: unknown manifest, auth
            said = shown(exc.explanation or exc, 200)
            if exc.status_code in (401, 403):
                msg = f"pull of {ref} was refused: {said}"
                raise RegistryAuthError(msg) from None
            msg = f"pull of {ref} failed: {said}"
            raise PublishError(msg) from None
        for _ in _checked(stream, f"pull of {ref}"):
            pass

    def push(self, ref: str, auth: dict[str, str] | None, on_line: LineSink) -> str:
        """Push ``ref``; return the manifest digest the registry reported."""
        repo, _, tag = ref.rpartition(":")
        stream = self.api.push(repo, tag=tag, stream=True, decode=True, auth_config=auth)
        digest = ""
        for chunk in _checked(stream, f"push of {ref}"):
            aux = chunk.get("aux") or {}
            if "Digest" in aux:
                digest = aux["Digest"]
            status = chunk.get("status")
            if status and "id" not in chunk:
                on_line(redact(status))
        if not digest:
            msg = f"push of {ref} reported no digest"
            raise PublishError(msg)
        return digest

    # --- containers ----------------------------------------------------------------------

    @contextmanager
    def container(self, image: str, *, purpose: str) -> Iterator[str]:
        """A running container of ``image`` that stays up until the block ends, then is removed
        (even on Ctrl-C) unless XPU_RELEASE_KEEP_CONTAINERS=1. Yields its name."""
        from ..settings import current

        name = f"xpu-release-{purpose}-{uuid.uuid4().hex[:12]}"

        def create() -> None:
            with refused_as(SmokeTestFailed, f"start a {purpose} container of {image[:19]}",
                            " (the checks run in it: does the image have `sleep`?)"):  # fmt: skip
                self.client.containers.run(image, command=["sleep", "infinity"], name=name, detach=True,
                                           labels={CONTAINER_LABEL: purpose}, network_mode="none",
                                           entrypoint=[], tmpfs=self.sight.masks(image))  # fmt: skip

        with throwaway(self.client, name, create, keep=current().keep_containers):
            yield name

    def output(self, image: str, argv: list[str], *, purpose: str) -> str:
        """Run ``argv`` in a throwaway container of ``image`` with no network; its stdout. The
        container is named and removed by this process (also on Ctrl-C), not by the client's
        ``remove=True``, which removes only after a run that was not interrupted."""
        name = f"xpu-release-{purpose}-{uuid.uuid4().hex[:12]}"

        def create() -> Any:
            mounts = self.sight.masks(image)
            return self.client.containers.run(image, command=argv, entrypoint=[], name=name,
                                              network_mode="none", detach=True, tmpfs=mounts,
                                              labels={CONTAINER_LABEL: purpose})  # fmt: skip

        with refused_as(BuildFailed, f"run {' '.join(argv[:2])} in {image}"), \
                throwaway(self.client, name, create) as container:  # fmt: skip
            status = int(container.wait()["StatusCode"])
            out = container.logs(stdout=True, stderr=False)
            if status != 0:
                err = container.logs(stdout=False, stderr=True).decode(errors="replace")
                msg = f"{' '.join(argv[:2])} in {image} exited {status}: {redact(err.strip()[-500:])}"
                raise BuildFailed(msg)
        return out.decode("utf-8", "replace") if isinstance(out, bytes) else str(out)

    def cpu_count(self) -> int:
        return self.sight.cpus

    def containers(self, purpose: str | None = None) -> list[str]:
        label = f"{CONTAINER_LABEL}={purpose}" if purpose else CONTAINER_LABEL
        return [c["Names"][0].lstrip("/") for c in self.api.containers(all=True, filters={"label": label})]


def _checked(stream: Any, what: str) -> Iterator[dict[str, Any]]:
    """The engine's pull or push stream, each line checked: an error in it (docker-py reports
    them inside an HTTP 200 answer) raised as a refusal or a failure, with the log so far."""
    log: list[str] = []
    for chunk in stream:
        message = _stream_error(chunk)
        if message is not None:
            log.append(message)
            lowered = message.lower()
            if any(
                k in lowered for k in ("unauthorized", "authentication required", "denied", "no basic auth")
            ):
                msg = f"{what} was refused: {message}"
                raise RegistryAuthError(msg, details="\n".join(log))
            msg = f"{what} failed: {message}"
            raise PublishError(msg, details="\n".join(log))
        log.append(redact(str(chunk.get("status") or "")))
        yield chunk


@contextmanager
def refused_as(error: type[ReleaseError], what: str, hint: str = "") -> Iterator[None]:
    """The engine refusing a container (docker's ``APIError``: an ``OSError`` with no file name,
    which the command line would call our bug, exit 70) as ``error``: "the engine would not
    {what}: {its answer, escaped}{hint}"."""
    from docker.errors import APIError

    try:
        yield
    except APIError as exc:
        msg = f"the engine would not {what}: {shown(engine_said(exc), 300)}{hint}"
        raise error(msg) from None
