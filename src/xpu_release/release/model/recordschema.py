"""The shape of a release record (``record.py``): what it must look like to be read at all, as a
JSON schema, and the first way a document differs from it."""

from __future__ import annotations

from typing import Any

from ...evidence.attachment import ALL_KINDS
from ...image.evaluation import EVALUATION_SCHEMA
from .iri import defer_iri_grammars

# What a record must look like to be read at all: the shape this module writes, nothing
# guessed. Checked on every read (exit 12 naming the file and the first thing wrong).
_DIGEST = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
_OPT_DIGEST = {"anyOf": [_DIGEST, {"type": "null"}]}
_OPT_STR = {"type": ["string", "null"]}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_STR = {"type": "string"}
_ENDPOINT = {
    "type": "object",
    "required": ["endpoint", "host", "version_ref", "floating_refs", "status", "digest"],
    "additionalProperties": False,
    "properties": {
        "endpoint": {"type": "string", "minLength": 1},
        "host": {"type": "string", "minLength": 1},
        "version_ref": {"type": "string", "minLength": 1},
        "floating_refs": {"type": "array", "items": {"type": "string"}},
        "status": {"enum": ["verified", "unchanged", "staged", "failed", "planned"]},
        "digest": _OPT_DIGEST,
        "error": _OPT_STR,
        "seconds": {"type": "number", "minimum": 0},
        "uploaded_bytes": {"type": "integer", "minimum": 0},
        "mounted_blobs": {"type": "integer", "minimum": 0},
        "skipped_blobs": {"type": "integer", "minimum": 0},
        "retries": {"type": "integer", "minimum": 0},
        "verified_at": _OPT_STR,
    },
}
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "xpu-release release record",
    "type": "object",
    "required": [
        "ref", "manifest", "manifest_sha256", "inputs_sha256", "tested_image_id", "digest",
        "published_at", "complete", "floating_moved", "endpoints",
    ],
    "additionalProperties": False,
    "properties": {
        "ref": {"type": "string", "pattern": "^[^:\\s]+:[^:\\s]+$"},
        "manifest": {"type": "string"},
        "manifest_sha256": {"type": "string"},
        "inputs_sha256": {"type": "string"},
        "tested_image_id": _DIGEST,
        "digest": _OPT_DIGEST,
        "published_at": {"type": "string"},
        "complete": {"type": "boolean"},
        "floating_moved": {"type": "array", "items": {"type": "string"}},
        "endpoints": {"type": "array", "items": _ENDPOINT},
        "attachments": {
            "type": "object",
            "propertyNames": {"enum": list(ALL_KINDS)},
            "additionalProperties": _DIGEST,
        },
        "withdrawn": {"anyOf": [{"type": "null"}, {
            "type": "object",
            "required": ["at", "by", "reason", "notice"],
            "properties": {"at": _STR, "by": _STR, "reason": _STR, "notice": _DIGEST},
        }]},
        "promotions": {"type": "array", "items": {
            "type": "object",
            "required": ["source", "channel", "endpoints", "at"],
            "additionalProperties": False,
            "properties": {"source": _STR, "channel": _STR, "at": _STR,
                           "endpoints": {"type": "array", "items": _STR}},
        }},
        "scan": {"anyOf": [{"type": "null"}, {
            "type": "object",
            "required": ["status", "reason", "findings"],
            "additionalProperties": False,
            "properties": {
                "status": {"enum": ["passed", "failed", "skipped"]},
                "reason": {"type": "string"},
                "findings": {"type": "array", "items": {
                    "type": "object",
                    "required": ["id", "package", "installed", "severity"],
                    # every field the notes and `diff` read has its type (an integer `aliases`
                    # crashed them); fields an earlier version wrote and none reads may stay
                    "properties": {"id": {"type": "string"}, "package": {"type": "string"},
                                   "installed": {"type": "string"}, "severity": {"type": "string"},
                                   "aliases": _STRINGS, "purls": _STRINGS, "fixed": _STRINGS,
                                   "vex": _OPT_STR, "justification": {"type": "string"}},
                }},
            },
        }]},
        "evaluation": {"anyOf": [{"type": "null"}, EVALUATION_SCHEMA]},
        "platforms": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["platform", "digest", "tested_image_id", "inputs_sha256"],
            "properties": {"platform": _STR, "digest": _OPT_DIGEST, "tested_image_id": _DIGEST,
                           "inputs_sha256": _STR, "size": {"type": "integer", "minimum": 0},
                           "attachments": {"type": "object", "propertyNames": {"enum": list(ALL_KINDS)},
                                           "additionalProperties": _DIGEST}},
        }},
    },
}  # fmt: skip


def is_evaluation(data: Any) -> bool:
    """``data`` has the shape of the record's ``evaluation`` (a kept one is taken again only
    then)."""
    defer_iri_grammars()
    from jsonschema import Draft202012Validator

    return bool(Draft202012Validator(EVALUATION_SCHEMA).is_valid(data))


def shape_problem(data: Any) -> str | None:
    """The first way ``data`` differs from ``SCHEMA`` (None: it is a record)."""
    defer_iri_grammars()
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(SCHEMA).iter_errors(data), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    first = errors[0]
    if first.context:  # one of several shapes (``scan``: none, or the gate's): the deepest field
        first = max(first.context, key=lambda e: (len(e.absolute_path), e.validator != "type"))
    where = ".".join(str(p) for p in first.absolute_path)
    if first.validator == "required" and isinstance(first.instance, dict):
        missing = [repr(k) for k in first.validator_value if k not in first.instance]
        return f"{where + ': ' if where else ''}has no {', '.join(missing)}"
    said = first.message if len(first.message) <= 160 else first.message[:157] + "..."
    return f"{where or 'the document'}: {said}"
