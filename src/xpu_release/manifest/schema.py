"""The manifest format, declared once: it validates manifests and prints their JSON Schema.

Every value that can reach a Dockerfile is a constrained string here (a version, a package
name, a path, an env value…): newlines, quotes, ``$``, backslashes and shell operators are
refused where they do not belong, so no manifest can add a Dockerfile instruction.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..errors import ManifestError
from .evaluation import EVALUATION
from .model import DEFAULT_BASE_REGISTRY
from .patchformat import PATCH
from .platforms import PLATFORM_VERSIONS, PLATFORMS
from .prose import COMMAND, FEATURE, KNOWN_ISSUE, LOCALIZED, PROSE_ITEM
from .tokens import (
    ABS_PATH,
    COMPONENT_ID,
    DEB_NAME,
    ENV_NAME,
    IMAGE_NAME,
    PIP_NAME,
    PY_MODULE,
    REGISTRY_ALIAS,
    REPOSITORY,
    SAFE_VALUE,
    SHA256,
    TAG,
    TOOL,
    URL,
    VERSION,
)
from .types import (
    JSON,
    LINE_BREAKS,
    UNSAFE_CATEGORIES,
    Bool,
    Checker,
    Date,
    Either,
    Enum,
    Int,
    List,
    Map,
    Nullable,
    Obj,
    Str,
    Text,
    Type,
    _describe,
    first_unsafe_char,
)
from .yamlsrc import Source, YamlProblems, load

__all__ = [
    "JSON",
    "LINE_BREAKS",
    "UNSAFE_CATEGORIES",
    "Bool",
    "Checker",
    "Either",
    "Enum",
    "List",
    "Map",
    "Nullable",
    "Obj",
    "Str",
    "Text",
    "Type",
    "_describe",
    "first_unsafe_char",
]


_COMMON = {
    "name": Str(
        pattern=r'[^"\\$`\x00-\x1f\x7f-\x9f\u2028\u2029]+',
        what="a display name",
        max_len=80,
        description="Display name in the notes, e.g. 'vLLM'.",
    ),
    "version": VERSION,
    "noted_as": Nullable(inner=VERSION, description="How the notes write the version, if not as pinned."),
    "about": Nullable(inner=LOCALIZED, description="One line on what the component is."),
}

BASE_COMPONENT = Obj(
    fields={"kind": Enum(choices=("base",)), **_COMMON, "platform_versions": PLATFORM_VERSIONS},
    required=("kind", "version"),
    description="Carried by the base image (e.g. the accelerator SDK); its version is the base tag.",
)
ARTIFACT_COMPONENT = Obj(
    fields={
        "kind": Enum(choices=("artifact",)),
        **_COMMON,
        "url": URL,
        "sha256": Nullable(inner=SHA256, description="null only for an assumed, unknown artifact."),
        "format": Enum(choices=("tar.gz", "deb")),
        "dest": ABS_PATH,
    },
    required=("kind", "version", "url", "sha256", "format", "dest"),
    description="A tarball or .deb fetched on the host, checked by sha256, unpacked in the image.",
)
PIP_COMPONENT = Obj(
    fields={
        "kind": Enum(choices=("pip",)),
        **_COMMON,
        "package": Nullable(inner=PIP_NAME, description="Distribution name if not the id."),
        "import": Nullable(inner=PY_MODULE, description="Module the smoke test imports."),
        "platform_versions": PLATFORM_VERSIONS,
    },
    required=("kind", "version"),
    description="A pinned Python distribution installed from the lock, with hashes.",
)
COMPONENT = Either(
    key="kind",
    shapes={"base": BASE_COMPONENT, "artifact": ARTIFACT_COMPONENT, "pip": PIP_COMPONENT},
)

CONSTRAINT = Str(
    pattern=r"[A-Za-z0-9](?:[A-Za-z0-9._\-]*[A-Za-z0-9])?>=[A-Za-z0-9][A-Za-z0-9._+\-]*",
    what="a lower bound",
    hint="NAME>=VERSION, e.g. urllib3>=2.5.0",
    max_len=170,
)
# Keys that describe one release only; everything else is inherited through `extends:` (the
# version is replaced by the child's, and prose may be scoped: see manifest/inherit.py).
NOT_INHERITED = ("extends", "release")

MANIFEST = Obj(
    fields={
        "image": IMAGE_NAME,
        "version": replace(TAG, description="Must match the file's name."),
        "extends": Nullable(inner=TAG, description="An earlier version of the same image."),
        "title": LOCALIZED,
        "scenario": List(item=Enum(choices=("training", "inference")), unique=True),
        "framework": Enum(choices=("pytorch",)),
        "platforms": PLATFORMS,
        "accelerator": Obj(
            fields={
                "name": Str(pattern=r"[A-Za-z0-9 ._\-]+", what="an accelerator name", max_len=40),
                "kind": Enum(choices=("ppu", "gpu", "cpu")),
            },
            required=("name", "kind"),
        ),
        "base": Obj(
            fields={
                "registry": Nullable(
                    inner=REGISTRY_ALIAS,
                    description=f"Where the base is served (default: {DEFAULT_BASE_REGISTRY}).",
                ),
                "repository": Nullable(inner=REPOSITORY, description="A base image by repository and tag…"),
                "tag": Nullable(inner=TAG),
                "image": Nullable(
                    inner=IMAGE_NAME,
                    description="…or another family's release to build on (with `version`), "
                    "pinned by the digest it was published with.",
                ),
                "version": Nullable(inner=TAG),
                "component": Nullable(inner=COMPONENT_ID, description="The `base` component it carries."),
                "python": replace(ABS_PATH, description="The base's Python interpreter."),
                "provides": List(
                    item=PIP_NAME,
                    unique=True,
                    description="Python distributions of the base that no layer may replace (the "
                    "SDK's own builds, e.g. torch); every other base distribution is a constraint too.",
                ),
            },
            required=("python",),
        ),
        "requirements": Obj(
            fields={
                "sdk": Nullable(
                    inner=Obj(
                        fields={
                            "name": Str(pattern=r"[A-Za-z0-9 ._\-]+", what="a name"),
                            "version": VERSION,
                        },
                        required=("name", "version"),
                    )
                ),
                "driver": Nullable(
                    inner=Str(
                        pattern=r"(?:>=|==|<=|>|<) ?[0-9][0-9.]*",
                        what="a driver constraint",
                        hint="e.g. '>= 1.1.0'",
                    )
                ),
            },
        ),
        "pip": Obj(
            fields={
                "index_url": Nullable(
                    inner=URL, description="Index the pins come from; null = pip's config."
                ),
                "find_links": List(item=Str(pattern="[^\\s\"'$`\\\\]+", what="a path or URL", max_len=500)),
                "install": Enum(
                    choices=("venv", "system"),
                    description="venv (default): layers install into /opt/venv, which sees the "
                    "base's packages; system: into the base interpreter's environment (an SDK image).",
                ),
                "constraints": List(
                    item=CONSTRAINT,
                    unique=True,
                    description="Lower bounds on dependencies no component pins (`urllib3>=2.5.0`), "
                    "which `lock` holds the resolution to: how a patch raises one past an advisory.",
                ),
            },
        ),
        "os_packages": List(item=DEB_NAME, unique=True, description="Debian packages installed, pinned."),
        "components": Map(value=COMPONENT, key=COMPONENT_ID, nullable_values=True),
        "env": Map(value=SAFE_VALUE, key=ENV_NAME, nullable_values=True, description="Set in the image."),
        "tools": List(item=TOOL, unique=True, description="Commands that must be on PATH."),
        "files": List(item=ABS_PATH, unique=True, description="Files that must exist in the image."),
        "floating_tags": List(item=TAG, unique=True, description="Tags moved after a verified publish."),
        "security": Obj(
            fields={
                "fail_on": Enum(
                    choices=("low", "medium", "high", "critical"),
                    description="The vulnerability gate stops a release on a finding at or above this "
                    "severity with no valid exception (default high).",
                ),
                "fail_on_unknown": Bool(
                    description="A finding of unknown severity stops the release too (default true)."
                ),
                "review_horizon_days": Int(
                    minimum=1,
                    maximum=3660,
                    description="How far ahead an exception's review_by may be, in days from the "
                    "scan (default 365): an exception further ahead is refused.",
                ),
                "sla_days": Obj(
                    fields={
                        level: Nullable(inner=Int(minimum=1, maximum=3660))
                        for level in ("critical", "high", "medium", "low")
                    },
                    description="Days an open finding of each severity may stay unpatched after its "
                    "advisory is published (`watch`; default critical 14, high 28, medium 180, low "
                    "none; null: none).",
                ),
            },
        ),
        "support": Obj(
            fields={
                "until": Date(
                    description="This release's end-of-life date: supported before it, end of life "
                    "from it on. Never inherited."
                ),
                "months": Int(
                    minimum=1,
                    maximum=240,
                    description="The family's policy: end of life this many months after the release's "
                    "date (`released`, else the month a YY.MM version names). Inherited.",
                ),
                "released": Date(description="The release's date, for `months`. Never inherited."),
            },
            description="How long the release is supported: metadata only, never a build input "
            "(changing it changes no image). Shown by list, status, doctor and the notes; attached "
            "as a lifecycle document by publish.",
        ),
        "sbom_formats": List(
            item=Enum(choices=("cyclonedx", "spdx")),
            unique=True,
            description="The SBOMs attached to the image: CycloneDX always; spdx adds SPDX 2.3 JSON, made "
            "from the same facts (default [cyclonedx]).",
        ),
        "evaluation": EVALUATION,
        "features": List(item=FEATURE, description="The notes' features."),
        "quick_start": List(item=COMMAND, description="The notes' Quick Start; {image} is the public ref."),
        "quick_start_intro": List(item=PROSE_ITEM, description="Paragraphs that open the Quick Start."),
        "usage_advice": List(item=PROSE_ITEM, description="The notes' usage advice."),
        "known_issues": List(item=KNOWN_ISSUE, description="The notes' known issues."),
        "release": Obj(
            fields={
                "upgraded": List(
                    item=COMPONENT_ID,
                    unique=True,
                    description="Components this release upgraded (when there is no parent to diff).",
                ),
                "added": List(
                    item=COMPONENT_ID,
                    unique=True,
                    description="Components this release newly supports (when there is no parent to diff).",
                ),
                "previous": Map(
                    value=VERSION,
                    key=COMPONENT_ID,
                    description="Versions in the previous release, when it has no manifest.",
                ),
                "bug_fixes": List(item=LOCALIZED),
                "highlights": List(item=LOCALIZED),
                "patch": PATCH,
            },
            description="This release only: never inherited.",
        ),
    },
    required=(
        "image",
        "version",
        "title",
        "scenario",
        "framework",
        "accelerator",
        "base",
        "components",
    ),
)


_CHECKED: dict[tuple[str, str, int, int, int, int], Source] = {}


def load_checked(path: Path, display: str, shape: Type) -> Source:
    """Load a YAML file safely and check it against ``shape``; every problem, located, at once.

    Read once per process: a file that ``render --all`` needs for every manifest (registries.yaml,
    images/<image>/image.yaml) is parsed and checked the first time only, while it is unchanged."""
    try:
        st = path.stat()
    except OSError:
        return _load_checked(path, display, shape)
    key = (str(path.resolve()), display, id(shape), st.st_mtime_ns, st.st_size, st.st_ino)
    if key not in _CHECKED:
        _CHECKED[key] = _load_checked(path, display, shape)
    return _CHECKED[key]


def _load_checked(path: Path, display: str, shape: Type) -> Source:
    try:
        src = load(path, display)
    except YamlProblems as exc:
        raise ManifestError(exc.problems) from None
    checker = Checker(src)
    shape.check(src.data, (), checker)
    if checker.problems:
        raise ManifestError(checker.problems)
    return src


def json_schema() -> JSON:
    """The published schema, for editors: a manifest without ``extends:`` must be complete; one
    that extends another need only carry what changed (every other key is inherited)."""
    child = MANIFEST.schema(partial=True)
    child["required"] = ["image", "version", "extends"]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://xpu-release.invalid/schema/manifest.schema.json",  # assumed: no public host yet
        "title": "xpu-release image manifest",
        "if": {"required": ["extends"], "properties": {"extends": {"type": "string"}}},
        "then": {"$ref": "#/$defs/child"},
        "else": {"$ref": "#/$defs/release"},
        "$defs": {"release": MANIFEST.schema(), "child": child},
    }
