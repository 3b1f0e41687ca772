"""The one adapter to the Docker engine (docker-py): build, inspect, tag, push, run.

docker-py reports build and push failures *inside* the JSON stream of an HTTP 200 answer, so
every stream line is checked for ``error``/``errorDetail`` and turned into a typed error that
keeps the full log. Containers are context managers: uuid-named, labelled, always removed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import BuildFailed, NotFoundError, PublishError, RegistryAuthError, StackError
from .secrets import redact

CONTAINER_LABEL = "io.xpu-release.container"
KEEP_ENV = "XPU_RELEASE_KEEP_CONTAINERS"

LineSink = Callable[[str], None]


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

    @classmethod
    def connect(cls) -> Engine:
        import docker
        from docker.errors import DockerException

        where = os.environ.get("DOCKER_HOST", "the default socket")
        try:
            client = docker.from_env(version="auto", timeout=600)
            client.ping()
        except DockerException as exc:
            msg = (
                f"no Docker engine answers at {where} ({type(exc).__name__}); "
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
    ) -> str:
        """Build ``context`` with no network in build containers; return the image id."""
        log: list[str] = []
        image_id = ""
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
        )
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
                msg = f"build of {tag} failed: {message}"
                raise BuildFailed(msg, details="".join(log))
            aux = chunk.get("aux") or {}
            if "ID" in aux:
                image_id = aux["ID"]
        if not image_id:
            info = self.image(tag)
            if info is None:
                msg = f"build of {tag} produced no image"
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

    def pull(self, ref: str) -> None:
        repo, _, tag = ref.rpartition(":")
        self._stream(self.api.pull(repo, tag=tag, stream=True, decode=True), f"pull of {ref}")

    def push(self, ref: str, auth: dict[str, str] | None, on_line: LineSink) -> str:
        """Push ``ref``; return the manifest digest the registry reported."""
        repo, _, tag = ref.rpartition(":")
        stream = self.api.push(repo, tag=tag, stream=True, decode=True, auth_config=auth)
        digest = ""
        for chunk in self._stream(stream, f"push of {ref}"):
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

    @staticmethod
    def _stream(stream: Any, what: str) -> Iterator[dict[str, Any]]:
        log: list[str] = []
        for chunk in stream:
            message = _stream_error(chunk)
            if message is not None:
                log.append(message)
                lowered = message.lower()
                if any(
                    k in lowered
                    for k in ("unauthorized", "authentication required", "denied", "no basic auth")
                ):
                    msg = f"{what} was refused: {message}"
                    raise RegistryAuthError(msg, details="\n".join(log))
                msg = f"{what} failed: {message}"
                raise PublishError(msg, details="\n".join(log))
            log.append(redact(str(chunk.get("status") or "")))
            yield chunk

    # --- containers ----------------------------------------------------------------------

    @contextmanager
    def container(self, image: str, *, purpose: str) -> Iterator[str]:
        """A running container of ``image`` that stays up until the block ends, then is removed
        (even on Ctrl-C) unless XPU_RELEASE_KEEP_CONTAINERS=1. Yields its name."""
        name = f"xpu-release-{purpose}-{uuid.uuid4().hex[:12]}"
        try:
            self.client.containers.run(
                image,
                command=["sleep", "infinity"],
                name=name,
                detach=True,
                labels={CONTAINER_LABEL: purpose},
                network_mode="none",
                entrypoint=[],
            )
            yield name
        finally:
            if os.environ.get(KEEP_ENV) != "1":
                self.remove_container(name)

    def remove_container(self, name: str) -> None:
        from docker.errors import NotFound

        with suppress(NotFound):
            self.api.remove_container(name, force=True)

    def containers(self, purpose: str | None = None) -> list[str]:
        label = f"{CONTAINER_LABEL}={purpose}" if purpose else CONTAINER_LABEL
        return [c["Names"][0].lstrip("/") for c in self.api.containers(all=True, filters={"label": label})]
