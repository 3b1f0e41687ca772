"""Make the C++ toolchain layer of the local stack's base with a compiler, reproducibly.

    python ci/toolchain.py ARCH BASE_TARBALL OUT_TARBALL MIRROR

assumed: the CPU SDK's base carries a C++ compiler, as an accelerator SDK image carries its
toolchain (torch.compile's inductor backend compiles C++ on the CPU, against Python.h). The
layer holds g++, the headers of the base's Python, and every Debian package they need that the
base (BASE_TARBALL, a debootstrapped root) does not have, from the same archive (MIRROR,
bookworm main) and for ARCH (amd64 or arm64, no emulation: the packages are unpacked, not run),
resolved by the host's apt against the base's own package database in folders of its own (the
host's apt state is not touched):

- each package unpacked (``dpkg-deb -x``), as dpkg would unpack it;
- the base's ``/var/lib/dpkg/status`` with each package added as installed, sorted by name as
  dpkg writes it, and its file list and md5sums under ``/var/lib/dpkg/info`` (``dpkg -l`` and a
  scanner see them);
- what the packages' maintainer scripts would have made: ``c++`` and ``cc`` through
  ``/etc/alternatives``, as g++'s and gcc's postinst make them (none of the others makes a file).

The same archive gives the same packages, so two machines make the same layer (ci/base-image.py
normalizes it as it does the base).
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGES = ("g++", "libpython3-dev")  # inductor compiles its kernels against Python.h
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
STATUS = "var/lib/dpkg/status"
# What g++'s and gcc's postinst register (update-alternatives --install LINK NAME PATH PRIORITY).
ALTERNATIVES = (("/usr/bin/c++", "c++", "/usr/bin/g++", 20), ("/usr/bin/cc", "cc", "/usr/bin/gcc", 20))


def apt(work: Path, arch: str, *args: str) -> str:
    options = {
        "APT::Architecture": arch,
        "APT::Architectures": arch,
        "Dir::State::status": str(work / "status"),
        "Dir::State::Lists": str(work / "lists"),
        "Dir::Cache": str(work / "cache"),
        "Dir::Etc::SourceList": str(work / "sources.list"),
        "Dir::Etc::SourceParts": str(work / "sources.list.d"),
        "Dir::Etc::Preferences": str(work / "preferences"),
        "Dir::Etc::PreferencesParts": str(work / "preferences.d"),
        "Debug::NoLocking": "true",
        "APT::Install-Recommends": "false",
    }
    argv = ["apt-get", "-qq"] + [f"-o{k}={v}" for k, v in options.items()] + list(args)
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"apt-get {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return done.stdout


def stanzas(text: str) -> dict[str, str]:
    """A dpkg status file's stanzas by their ``Package`` (with ``:arch`` for Multi-Arch: same)."""
    found = {}
    for stanza in re.split(r"\n\s*\n", text.strip()):
        name = re.search(r"^Package: (.+)$", stanza, re.MULTILINE)
        if name is None:
            continue
        arch = re.search(r"^Architecture: (.+)$", stanza, re.MULTILINE)
        found[f"{name.group(1)}:{arch.group(1) if arch else 'all'}"] = stanza.strip() + "\n"
    return found


def installed(control: str) -> str:
    """A package's control, as dpkg's status holds it once installed (Status after Package)."""
    lines = control.strip().splitlines()
    return "\n".join([lines[0], "Status: install ok installed", *lines[1:]]) + "\n"


def merged(root: Path, base_tarball: str) -> None:
    """Unpacked into an empty folder, a package's ``/lib`` is a folder; in the base it is a link
    into ``/usr`` (merged /usr), and a layer's folder there would hide the link and every file
    under it (the dynamic loader among them). What landed under such a name moves to where the
    link points."""
    with tarfile.open(base_tarball) as base:
        links = {m.name.removeprefix("./"): m.linkname for m in base if m.issym() and m.name.count("/") == 1}
    for name, target in links.items():
        folder = root / name
        if not folder.is_dir() or folder.is_symlink():
            continue
        for path in sorted(folder.rglob("*"), key=lambda p: len(p.parts)):
            moved = root / target / path.relative_to(folder)
            if path.is_dir() and not path.is_symlink():
                moved.mkdir(parents=True, exist_ok=True)
            else:
                moved.parent.mkdir(parents=True, exist_ok=True)
                path.rename(moved)
        shutil.rmtree(folder)


def main(arch: str, base_tarball: str, out: str, mirror: str) -> None:
    with tempfile.TemporaryDirectory(prefix="xpu-toolchain-") as tmp_name:
        work = Path(tmp_name)
        for folder in ("lists/partial", "cache/archives/partial", "sources.list.d", "preferences.d", "root"):
            (work / folder).mkdir(parents=True)
        (work / "preferences").write_text("")
        (work / "sources.list").write_text(f"deb [signed-by={KEYRING}] {mirror} bookworm main\n")
        with tarfile.open(base_tarball) as base:
            member = base.extractfile(f"./{STATUS}")
            assert member is not None
            status = member.read().decode()
        (work / "status").write_text(status)
        apt(work, arch, "update")
        apt(work, arch, "install", "--download-only", "-y", *PACKAGES)
        debs = sorted((work / "cache" / "archives").glob("*.deb"))
        if not debs:
            sys.exit("apt found nothing to install: the base has the toolchain already?")
        root = work / "root"
        entries = stanzas(status)
        info = root / "var/lib/dpkg/info"
        info.mkdir(parents=True)
        for deb in debs:
            subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
            control = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True, check=True)
            fields = dict(
                re.findall(r"^(Package|Architecture|Multi-Arch): (.+)$", control.stdout, re.MULTILINE)
            )
            name = fields["Package"]
            if fields.get("Multi-Arch") == "same":
                name += f":{fields['Architecture']}"
            entries[f"{fields['Package']}:{fields['Architecture']}"] = installed(control.stdout)
            listing = subprocess.run(
                ["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=True
            )
            with tarfile.open(fileobj=io.BytesIO(listing.stdout)) as files:
                paths = ["/." if m.name in (".", "./") else "/" + m.name.removeprefix("./").rstrip("/")
                         for m in files]  # fmt: skip
            (info / f"{name}.list").write_text("".join(p + "\n" for p in paths))
            with tempfile.TemporaryDirectory() as control_dir:
                subprocess.run(["dpkg-deb", "-e", str(deb), control_dir], check=True)
                sums = Path(control_dir) / "md5sums"
                if sums.exists():
                    (info / f"{name}.md5sums").write_bytes(sums.read_bytes())
        merged(root, base_tarball)
        (root / STATUS).write_text("\n".join(entries[k] for k in sorted(entries)))
        for link, name, path, priority in ALTERNATIVES:
            (root / "etc/alternatives").mkdir(parents=True, exist_ok=True)
            (root / "etc/alternatives" / name).symlink_to(path)
            (root / link.lstrip("/")).symlink_to(f"/etc/alternatives/{name}")
            record = root / "var/lib/dpkg/alternatives" / name
            record.parent.mkdir(parents=True, exist_ok=True)
            record.write_text(f"auto\n{link}\n\n{path}\n{priority}\n\n")
        subprocess.run(["tar", "--numeric-owner", "--sort=name", "-C", str(root), "-cf", out + ".tmp", "."],
                       check=True)  # fmt: skip
        Path(out + ".tmp").rename(out)
    print(f"{len(debs)} packages: " + " ".join(d.name.split("_")[0] for d in debs))


if __name__ == "__main__":
    main(*sys.argv[1:])
