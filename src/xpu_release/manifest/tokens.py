"""The constrained strings of the manifest format: every value that can reach a Dockerfile (a
version, a package name, a path, an env value…) is one of these, so newlines, quotes, ``$``,
backslashes and shell operators are refused where they do not belong and no manifest can add a
Dockerfile instruction. ``schema.py`` builds the format from them."""

from __future__ import annotations

from .types import Str

# --- the constrained strings that may reach a Dockerfile --------------------------------------

# A version is one safe token: PEP 440, semver, `1.4.3_hotfix`, `v1.4.3-8`, `4.49.0+ali`.
VERSION = Str(
    pattern=r"[A-Za-z0-9][A-Za-z0-9._+\-]*",
    what="a valid version",
    hint="one token of letters, digits and . _ + - ; no spaces, quotes or $",
    max_len=64,
)
# The OCI distribution spec's tag grammar.
TAG = Str(
    pattern=r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}",
    what="a valid OCI tag",
    hint="letters, digits, _ . - ; at most 128 characters, not starting with . or -",
    max_len=128,
)
IMAGE_NAME = Str(
    pattern=r"[a-z0-9]+(?:[._\-][a-z0-9]+)*",
    what="a valid image name",
    hint="lowercase letters, digits and single . _ - between them",
    max_len=128,
)
REPOSITORY = Str(
    pattern=r"[a-z0-9]+(?:[._\-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._\-][a-z0-9]+)*)*",
    what="a valid repository path",
    hint="lowercase path components separated by /",
    max_len=255,
)
COMPONENT_ID = Str(
    pattern=r"[a-z0-9]+(?:[._\-][a-z0-9]+)*",
    what="a valid component id",
    hint="lowercase letters, digits and - . _",
    max_len=64,
)
PIP_NAME = Str(
    pattern=r"[A-Za-z0-9](?:[A-Za-z0-9._\-]*[A-Za-z0-9])?",
    what="a valid Python distribution name",
    hint="PEP 508 name: letters, digits, . _ -",
    max_len=100,
)
PY_MODULE = Str(
    pattern=r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*",
    what="a valid Python module name",
    max_len=100,
)
ENV_NAME = Str(
    pattern=r"[A-Za-z_][A-Za-z0-9_]*",
    what="a valid environment variable name",
    hint="letters, digits and _, not starting with a digit",
    max_len=100,
)
# Env and label values are written double-quoted: refuse what could end the quote or expand.
SAFE_VALUE = Str(
    pattern=r'[^"\\$`\x00-\x1f\x7f-\x9f\u2028\u2029]*',
    what="a safe value",
    hint="no quotes, backslashes, $, backticks or control characters",
    max_len=500,
)
ABS_PATH = Str(
    pattern=r"/(?:[A-Za-z0-9._+\-]+/?)*",
    what="an absolute path",
    hint="/ followed by letters, digits and . _ + - only",
    max_len=255,
)
URL = Str(
    pattern=r"(?:https?|file)://[A-Za-z0-9._~:/?#\[\]@!%+,;=\-]+",
    what="a valid URL",
    hint="http(s):// or file:// with no spaces, quotes, $ or &",
    max_len=500,
)
SHA256 = Str(pattern=r"[0-9a-f]{64}", what="a sha256 digest", hint="64 lowercase hex digits")
DEB_NAME = Str(
    pattern=r"[a-z0-9][a-z0-9+.\-]+=[A-Za-z0-9.+~:\-]+",
    what="a pinned Debian package",
    hint="name=version, e.g. libgomp1=12.2.0-14",
    max_len=120,
)
TOOL = Str(pattern=r"[A-Za-z0-9][A-Za-z0-9._+\-]*", what="a valid command name", max_len=64)
REGISTRY_ALIAS = Str(
    pattern=r"[a-z][a-z0-9_\-]*", what="a registry alias", hint="a name from registries.yaml"
)
