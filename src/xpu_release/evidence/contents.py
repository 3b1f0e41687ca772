"""What is installed in an image, read the way scanners read it (trivy, syft): its operating
system, every package dpkg installed, and every Python distribution on disk.

One throwaway container of the image, with no network, runs ``SCRIPT`` (POSIX sh and the tools
Debian marks essential: find, sed, grep) and prints one tagged line per fact; ``parse`` turns them
into values. Python distributions are every ``*.dist-info`` and ``*.egg-info`` anywhere in the
image's file system, not only what pip lists for the main environment: the venv's own ``pip``,
and what packages vendor (ray's ``thirdparty_files``, setuptools' ``_vendor``) are installed
code too, and a scanner finds them. As trivy does, a distribution whose metadata a Debian
package installed is left to that Debian package (it is listed once, as the Debian package).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from ..image.engine import Engine

# Every line is "<tag>\t<fields…>". The find prunes the kernel's file systems; -xdev keeps it on
# the image's own root.
SCRIPT = r"""
if [ -r /etc/os-release ]; then . /etc/os-release; fi
printf 'os\t%s\t%s\n' "${ID:-}" "${VERSION_ID:-}"
if [ -r /etc/debian_version ]; then printf 'os-version\t%s\n' "$(head -n 1 /etc/debian_version)"; fi
if command -v dpkg-query >/dev/null 2>&1; then
  dpkg-query -W -f 'deb\t${Package}\t${Version}\t${Architecture}\t${source:Package}\t${source:Version}\n'
  cat /var/lib/dpkg/info/*.list 2>/dev/null \
    | grep -E '\.(dist|egg)-info(/METADATA|/PKG-INFO)?$|/EGG-INFO/PKG-INFO$' | sed 's/^/owned\t/'
fi
if ! command -v find >/dev/null 2>&1; then echo 'python-unknown'; exit 0; fi
find / -xdev \( -path /proc -o -path /sys -o -path /dev \) -prune -o \
  \( -name '*.dist-info' -o -name '*.egg-info' -o -name EGG-INFO \) -print 2>/dev/null \
| while IFS= read -r d; do
  if [ -f "$d/METADATA" ]; then m="$d/METADATA"; elif [ -f "$d/PKG-INFO" ]; then m="$d/PKG-INFO";
  elif [ -f "$d" ]; then m="$d"; else continue; fi
  n=$(sed -n '/^\r*$/q; s/^Name:[[:space:]]*//p' "$m" | head -n 1 | tr -d '\r')
  v=$(sed -n '/^\r*$/q; s/^Version:[[:space:]]*//p' "$m" | head -n 1 | tr -d '\r')
  printf 'py\t%s\t%s\t%s\t%s\n' "$d" "$m" "$n" "$v"
done
"""


@dataclass(frozen=True, kw_only=True)
class OperatingSystem:
    family: str  # os-release's ID: debian
    release: str  # its VERSION_ID: 12
    version: str  # the point release scanners name (/etc/debian_version: 12.15), else the release

    @property
    def distro(self) -> str:
        """The purl ``distro`` qualifier of its packages, as syft writes it: ``debian-12``."""
        return f"{self.family}-{self.release}" if self.release else self.family


@dataclass(frozen=True, kw_only=True)
class Deb:
    name: str
    version: str
    arch: str
    source: str = ""  # the source package it was built from (advisories name sources), "" = name
    source_version: str = ""  # "" = version


@dataclass(frozen=True, kw_only=True)
class Installed:
    """A Python distribution found on disk."""

    name: str  # as its metadata says it (``Name:``)
    version: str  # ``Version:``
    location: str  # its .dist-info / .egg-info directory (or .egg-info file)

    @property
    def top_level(self) -> bool:
        """It sits directly in an environment's package folder, where pip installs; False for
        one vendored inside another package's tree."""
        return PurePosixPath(self.location).parent.name in ("site-packages", "dist-packages")


@dataclass(frozen=True, kw_only=True)
class Contents:
    os: OperatingSystem | None
    debs: tuple[Deb, ...]
    python: tuple[Installed, ...] | None  # None: the image has no ``find`` to look with


def parse(out: str) -> Contents:
    """The facts ``SCRIPT`` printed (lines of another shape are ignored)."""
    family = release = version = ""
    debs: list[Deb] = []
    owned: set[str] = set()
    found: list[tuple[str, str, str, str]] = []
    searched = True
    for line in out.splitlines():
        tag, _, rest = line.partition("\t")
        f = rest.split("\t")
        if tag == "os" and len(f) == 2:
            family, release = f[0].strip(), f[1].strip()
        elif tag == "os-version" and f[0].strip():
            version = f[0].strip()
        elif tag == "deb" and len(f) == 5 and f[0]:
            name, ver, arch, source, source_version = f
            debs.append(Deb(name=name, version=ver, arch=arch, source="" if source == name else source,
                            source_version="" if source_version == ver else source_version))  # fmt: skip
        elif tag == "owned":
            owned.add(rest)
        elif tag == "py" and len(f) == 4:
            found.append((f[0], f[1], f[2].strip(), f[3].strip()))
        elif line == "python-unknown":
            searched = False
    system = None
    if family:
        # Debian's point release (12.15) where it has one; "bookworm/sid" and the like are not.
        point = version if version[:1].isdigit() and version.split(".")[0] == release else release
        system = OperatingSystem(family=family, release=release, version=point)
    python = tuple(sorted(
        (Installed(name=name, version=ver, location=where)
         for where, meta, name, ver in found if name and ver and not {where, meta} & owned),
        key=lambda d: (d.location, d.name),
    ))  # fmt: skip
    return Contents(os=system, debs=tuple(sorted(debs, key=lambda d: (d.name, d.arch))),
                    python=python if searched else None)  # fmt: skip


def read_contents(engine: Engine, image_id: str) -> Contents:
    """What ``image_id`` has installed, from one throwaway container of it."""
    return parse(engine.output(image_id, ["/bin/sh", "-c", SCRIPT], purpose="sbom"))
