"""The file formats' reference page, walked from their declarations: the manifest
(``manifest/schema.py``, which also prints ``schema/manifest.schema.json``), the image definition
(``image/render.py``) and the registries file (``manifest/registries.py``): every key with what its
value is, whether it is required, and what it means."""

from __future__ import annotations

from collections.abc import Iterator

from ..guard import limits
from ..image.layerform import MAX_PROFILE_PATH
from ..image.render import IMAGE_FILE
from ..manifest.prose import LOCALIZED
from ..manifest.registries import FILE as REGISTRIES_FILE
from ..manifest.schema import MANIFEST, NOT_INHERITED
from ..manifest.types import Bool, Date, Either, Enum, Int, List, Map, Nullable, Obj, Str, Text, Type
from .markdown import cell, generated

Row = tuple[str, str, bool, str]  # key path, what its value is, required, what it means


def kind(t: Type) -> str:
    """What a value of type ``t`` is, in words."""
    if t is LOCALIZED:
        return "text in `en` and `zh`"
    if isinstance(t, Str):
        return f"{t.what} ({t.hint})" if t.hint else t.what
    if isinstance(t, Text):
        return f"text (Markdown), at most {t.max_len} characters"
    if isinstance(t, Bool):
        return "`true` or `false`"
    if isinstance(t, Date):
        return "a date, YYYY-MM-DD"
    if isinstance(t, Int):
        return f"a whole number, {t.minimum} to {t.maximum}"
    if isinstance(t, Enum):
        return "one of " + ", ".join(f"`{c}`" for c in t.choices)
    if isinstance(t, Nullable):
        return f"{kind(t.inner)}, or `null`"
    if isinstance(t, List):
        return f"a list of {kind(t.item)}" + (", each at most once" if t.unique else "")
    if isinstance(t, Map):
        removes = " (`null` removes an inherited entry)" if t.nullable_values else ""
        return f"a mapping of {t.key.what} to {kind(t.value)}{removes}"
    if isinstance(t, Either):
        return "a mapping whose `" + t.key + "` is " + ", ".join(f"`{k}`" for k in t.shapes)
    return "a mapping"


def rows(t: Type, path: str, required: bool) -> Iterator[Row]:
    """The row of ``t`` at ``path``, then a row for every key inside it."""
    described = t.inner if isinstance(t, Nullable) and not t.description else t
    yield path, kind(t), required, "" if described is LOCALIZED else described.description
    inner = t.inner if isinstance(t, Nullable) else t
    if isinstance(inner, List):
        inner, path = inner.item, f"{path}[]"
    elif isinstance(inner, Map):
        inner, path = inner.value, f"{path}.<id>"
    if isinstance(inner, Either):
        yield from shapes(inner, path)
    elif isinstance(inner, Obj) and inner is not LOCALIZED:
        yield from fields(inner, path)


def shapes(either: Either, path: str) -> Iterator[Row]:
    """The keys of every shape once: a key some shapes lack says which have it."""
    yield f"{path}.{either.key}", kind(Enum(choices=tuple(either.shapes))), True, "Which shape this is."
    found: dict[Row, list[str]] = {}
    for name, shape in either.shapes.items():
        rest = Obj(fields={k: t for k, t in shape.fields.items() if k != either.key}, required=shape.required)
        for row in fields(rest, path):
            found.setdefault(row, []).append(name)
    for (key, what, required, description), names in found.items():
        if len(names) < len(either.shapes):
            only = " or ".join(f"`{either.key}: {n}`" for n in names)
            description = f"Only with {only}. {description}".strip()
        yield key, what, required, description


def fields(obj: Obj, prefix: str) -> Iterator[Row]:
    for key, t in obj.fields.items():
        yield from rows(t, f"{prefix}.{key}" if prefix else key, key in obj.required)


def table(obj: Obj) -> str:
    out = ["| key | value | required | what it means |", "|---|---|---|---|"]
    for path, what, required, description in fields(obj, ""):
        needed = "yes" if required else ""
        out.append(f"| {cell(path, code=True)} | {cell(what)} | {needed} | {cell(description)} |")
    return "\n".join(out)


def formats_page() -> str:
    not_inherited = ", ".join(f"`{k}`" for k in NOT_INHERITED)
    return "\n\n".join([
        "# File formats",
        generated("the formats' declarations (src/xpu_release/manifest/schema.py, image/render.py, "
                  "manifest/registries.py)"),
        "The files a maintainer writes: manifests, image definitions and registries files. One "
        "declaration per format checks every file (`xpu-release validate`, every problem located as "
        "file:line:col, unknown keys with a *did you mean*) and, for manifests, prints the JSON "
        "Schema editors use (`schema/manifest.schema.json`, `xpu-release schema`). YAML is loaded "
        "safely: no object tags, no anchors or aliases, 256 KiB at most. `<id>` stands for a key of "
        "the writer's choosing (a component id, a variable name, a region); `[]` for each item of a "
        "list.",
        "## Manifests: `manifests/<image>/<version>.yaml`",
        "How manifests are written and inherited: [../using/manifests.md](../using/manifests.md). "
        "A manifest without `extends:` must carry every *required* key below. One that says "
        f"`extends: <version>` needs only `image`, `version` and `extends`: every key but {not_inherited} "
        "is inherited from that version (mappings merge key by key, lists replace, `null` removes "
        "an inherited component or variable). Every value that can reach a Dockerfile is a "
        "constrained token: line breaks, control characters, quotes, `$` and shell operators are "
        "refused where they do not belong.",
        table(MANIFEST),
        "## Image definitions: `images/<image>/image.yaml`",
        f"{IMAGE_FILE.description} Without the file, an image renders with `templates/Dockerfile.j2`; "
        "with it, `template` must be given.",
        table(IMAGE_FILE),
        "## Prefetch profiles: `images/<image>/<version>/prefetch.txt`",
        "An eStargz image's prefetch profile, made by `xpu-release profile NAME:VERSION` and "
        "reviewed as a lock ([../using/lazy-pulling.md](../using/lazy-pulling.md)): UTF-8 text, "
        "one path a line (a line ends at `\\n` alone), in the order the workload first opened "
        "them; blank lines and lines starting with `#` are passed over. Each path is absolute, "
        f"at most {MAX_PROFILE_PATH:,} characters, printable (no control or line-separator "
        "character), without a backslash or white space at either end, written plainly (no `//`, "
        "`/./`, `/../` or `/` at the end: one spelling a file, as a layer's writer keys it) and "
        "listed once; the file "
        f"is at most {limits.MAX_PROFILE_BYTES >> 20} MiB. `validate` names every line that breaks "
        "a rule (exit 2). A version without the file takes the one of the version it extends.",
        "## Registries files: `registries.yaml` and its overrides",
        "`registries.yaml` names the real endpoints; a second file (`--registries FILE`, "
        "`XPU_RELEASE_REGISTRIES`) overrides it field by field. How: "
        "[../using/registries.md](../using/registries.md).",
        table(REGISTRIES_FILE),
    ]) + "\n"  # fmt: skip
