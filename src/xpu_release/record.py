"""The release record: what was published where, with which digest, verified when.

Written by every publish (also a failed one: it says which endpoints are done), read by
``status`` and by the release notes, archived by CI.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from .errors import DamagedFileError, NotFoundError

# staged: the endpoint holds the release by digest, but its version tag is not written yet
# (another endpoint failed, so no tag was written anywhere).
Status = Literal["verified", "unchanged", "staged", "failed", "planned"]


@dataclass(frozen=True, kw_only=True)
class EndpointRecord:
    endpoint: str
    host: str
    version_ref: str
    floating_refs: tuple[str, ...]
    status: Status
    digest: str | None
    error: str | None = None
    seconds: float = 0.0
    uploaded_bytes: int = 0
    mounted_blobs: int = 0
    skipped_blobs: int = 0
    retries: int = 0
    verified_at: str | None = None


@dataclass(frozen=True, kw_only=True)
class ReleaseRecord:
    ref: str
    manifest: str
    manifest_sha256: str
    inputs_sha256: str
    tested_image_id: str  # the config digest the smoke tests ran against
    digest: str | None  # the manifest digest every endpoint serves
    published_at: str
    complete: bool  # every endpoint verified
    floating_moved: tuple[str, ...]
    endpoints: tuple[EndpointRecord, ...] = field(default_factory=tuple)
    # Documents attached to the image by digest at every endpoint (attest.py, referrers.py):
    # kind ("sbom", "provenance") → the digest of the artifact manifest that carries it.
    attachments: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReleaseRecord:
        eps = tuple(
            EndpointRecord(**{**e, "floating_refs": tuple(e["floating_refs"])}) for e in data["endpoints"]
        )
        return cls(**{**data, "endpoints": eps, "floating_moved": tuple(data["floating_moved"]),
                      "attachments": dict(data.get("attachments") or {})})  # fmt: skip


def default_path(root: Path, image: str, version: str) -> Path:
    return root / "out" / "releases" / image / f"{version}.json"


def write(record: ReleaseRecord, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record.to_json(), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def read(path: Path) -> ReleaseRecord:
    if not path.is_file():
        msg = f"no release record at {path}; publish first or pass --record"
        raise NotFoundError(msg)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            msg = "a JSON object"
            raise TypeError(msg)
        return ReleaseRecord.from_json(data)
    except UnicodeDecodeError:
        why = "is not UTF-8 text"
    except json.JSONDecodeError as exc:
        why = f"is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
    except KeyError as exc:
        why = f"has no {exc.args[0]!r}"
    except TypeError as exc:
        why = f"is not a release record ({_first_line(exc)})"
    msg = (
        f"{path}: the release record {why}; publish again to rewrite it (the registries are the "
        "truth: `xpu-release status REF` reads them), or pass --record with an intact copy"
    )
    raise DamagedFileError(msg)


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
