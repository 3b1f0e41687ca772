"""The registries file: logical registries (public, vpc per region, base-image hub) → endpoints.

``registries.yaml`` in the repository names the real endpoints. A second file, chosen with
``--registries FILE`` or ``XPU_RELEASE_REGISTRIES``, overrides them field by field, e.g. to map
every logical registry to a local one (``ci/local-stack.sh env`` writes such a file).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ManifestError
from ..oci.endpoint import Endpoint, host_problem
from . import schema, tokens
from .yamlsrc import Source

_HOST = schema.Str(
    pattern=r"[A-Za-z0-9.\-]+(?:\{region\}[A-Za-z0-9.\-]*)?(?::[0-9]{1,5})?",
    what="a registry host",
    hint="host[:port], with {region} for a per-region VPC pattern",
    max_len=255,
)
REGISTRY = schema.Obj(
    fields={
        "role": schema.Enum(
            choices=("public", "vpc", "base"),
            description="public: published to; vpc: published to in every region; base: base images are "
            "pulled from it. Required once the files are merged, as are host and namespace.",
        ),
        "host": replace(_HOST, description="Where it is served; {region} stands for each region's id."),
        "namespace": replace(tokens.REPOSITORY, description="The path images are published under."),
        "regions": schema.List(
            item=schema.Str(pattern=r"[a-z0-9\-]+", what="a region id"),
            unique=True,
            description="The VPC regions a release goes to.",
        ),
        "hosts": schema.Map(
            value=_HOST,
            key=schema.Str(pattern=r"[a-z0-9\-]+", what="a region id"),
            description="Per-region host overrides.",
        ),
        "insecure": schema.Bool(description="Plain HTTP (loopback test registries only)."),
        "token_hosts": schema.List(
            item=schema.Str(pattern=r"[A-Za-z0-9.\-]+(?::[0-9]{1,5})?", what="a host", max_len=255),
            unique=True,
            description="Hosts besides `host` whose token service (the realm a 401 names) may be sent "
            "our login, e.g. `auth.docker.io` for Docker Hub; a realm on any other host is refused.",
        ),
        "ca_file": schema.Str(
            pattern=r"[^\n\r]+",
            what="a path",
            max_len=500,
            description="A CA certificate the host's TLS is checked with.",
        ),
    },
)
FILE = schema.Obj(
    fields={"registries": schema.Map(value=REGISTRY, key=tokens.REGISTRY_ALIAS)},
    required=("registries",),
)


@dataclass(frozen=True, kw_only=True)
class Registries:
    source: str  # which files it came from, for messages
    entries: tuple[tuple[str, dict[str, Any]], ...]
    # The repository's own registries.yaml, without the override (None: no override), which the
    # committed Dockerfiles name: read in the same pass, so no command parses a file twice.
    own: tuple[tuple[str, dict[str, Any]], ...] | None = None

    def committed(self) -> Registries:
        """The registries as the repository's own file says, whatever overrides them here."""
        if self.own is None:
            return self
        return Registries(source="registries.yaml", entries=self.own)

    def _entry(self, alias: str) -> dict[str, Any]:
        for name, entry in self.entries:
            if name == alias:
                return entry
        known = ", ".join(n for n, _ in self.entries)
        msg = f"{self.source}: no registry named {alias!r} (known: {known})"
        raise ConfigError(msg)

    def endpoint(self, alias: str, region: str | None = None) -> Endpoint:
        e = self._entry(alias)
        host = e["host"]
        if region is not None:
            host = (e.get("hosts") or {}).get(region, host)
            host = host.replace("{region}", region)
        elif "{region}" in host:
            msg = f"{self.source}: registry {alias!r} is per-region; name a region"
            raise ConfigError(msg)
        problem = host_problem(host)
        if problem is not None:
            msg = f"{self.source}: registry {alias!r}: the host {host!r} {problem}"
            raise ConfigError(msg)
        return Endpoint(
            registry=alias,
            role=e["role"],
            region=region,
            host=host,
            namespace=e["namespace"],
            insecure=bool(e.get("insecure", False)),
            ca_file=e.get("ca_file"),
            token_hosts=tuple(e.get("token_hosts") or ()),
        )

    def publish_endpoints(self) -> tuple[Endpoint, ...]:
        """Every endpoint a release goes to: the public one(s) first, then each VPC region."""
        out: list[Endpoint] = []
        for name, e in self.entries:
            if e["role"] == "public":
                out.append(self.endpoint(name))
        for name, e in self.entries:
            if e["role"] == "vpc":
                out.extend(self.endpoint(name, r) for r in e.get("regions") or ())
        return tuple(out)

    def vpc_pattern(self) -> tuple[str, tuple[str, ...]] | None:
        """The VPC pattern and its regions, when every region follows it (no per-region hosts)."""
        for _, e in self.entries:
            if e["role"] == "vpc" and not e.get("hosts") and "{region}" in e["host"]:
                return f"{e['host']}/{e['namespace']}", tuple(e.get("regions") or ())
        return None


def _checked(path: Path, display: str) -> Source:
    """A registries file, checked; every mistake in one is a configuration error (exit 3)."""
    try:
        return schema.load_checked(path, display, FILE)
    except ManifestError as exc:
        raise ConfigError(exc.render()) from None


def _override_problems(base: dict[str, dict[str, Any]], over: Source) -> list[str]:
    """An override must resolve every key it names, and must map every endpoint a release
    writes to: a typo or a gap must never send a test push to the production registries."""
    problems: list[str] = []
    entries: dict[str, Any] = over.data["registries"]
    for name, entry in entries.items():
        merged = {**base.get(name, {}), **entry}
        regions = set(merged.get("regions") or ())
        for region in entry.get("hosts") or {}:
            if region not in regions:
                known = ", ".join(sorted(regions)) or "none"
                message = f"no region {region!r} in registry {name!r} (its regions: {known})"
                problems.append(str(over.problem(("registries", name, "hosts", region), message, key=True)))
    for name, entry in base.items():
        if entry.get("role") not in ("public", "vpc"):
            continue  # base images are only pulled: the hub may stay the repository's own
        given = entries.get(name)
        if given is None:
            problems.append(
                f"{over.file}: maps no {name!r} registry, so it would publish to the production "
                f"{entry['host']}; map it (or leave out the override)"
            )
            continue
        if entry.get("role") == "vpc" and "host" not in given:
            hosts = given.get("hosts") or {}
            for region in given.get("regions") or entry.get("regions") or ():
                if region not in hosts:
                    problems.append(
                        f"{over.file}: registry {name!r} maps no host for region {region!r}, so it "
                        f"would publish to production {entry['host'].replace('{region}', region)}; "
                        f"add it under hosts (or drop it from regions)"
                    )
        elif "host" not in given:
            problems.append(
                f"{over.file}: registry {name!r} has no host, so it would publish to the production "
                f"{entry['host']}; give it one"
            )
    return problems


def load_registries(root: Path, override: str | None = None) -> Registries:
    """The repository's ``registries.yaml``, overridden by ``override`` (``--registries`` or
    ``$XPU_RELEASE_REGISTRIES``, which the CLI reads)."""
    base = _checked(root / "registries.yaml", "registries.yaml")
    own = tuple((k, dict(v)) for k, v in base.data["registries"].items())
    merged: dict[str, dict[str, Any]] = {k: dict(v) for k, v in own}
    sources = ["registries.yaml"]
    if override:
        path = Path(override)
        if not path.is_file():
            msg = f"registries override {override} does not exist"
            raise ConfigError(msg)
        over = _checked(path, str(path))
        problems = _override_problems(merged, over)
        if problems:
            raise ConfigError("\n".join(problems))
        for name, entry in over.data["registries"].items():
            merged.setdefault(name, {}).update(entry)
        sources.append(str(path))
    source = " + ".join(sources)
    for name, entry in merged.items():
        missing = [k for k in ("role", "host", "namespace") if k not in entry]
        if missing:
            msg = f"{source}: registry {name!r} lacks {', '.join(missing)}"
            raise ConfigError(msg)
    return Registries(source=source, entries=tuple(merged.items()), own=own if override else None)
