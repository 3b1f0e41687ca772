"""Exit 70 is our bug, never the user's mistake: every engine-free command, driven by Hypothesis
with generated refs, versions, option values, paths and file contents (control and separator
characters, very long strings, huge numbers, paths that are directories, FIFOs, symbolic-link
loops, full devices), in a temporary copy of the repository, ends in a documented exit code,
with a short error and no traceback, and writes nothing outside that copy.

CI runs the ``ci`` profile (fixed seed, a budget that keeps it under a minute); for a deeper
search: ``pytest tests/unit/cli/test_no_internal_error.py --hypothesis-profile=long``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from xpu_release.cli import cli
from xpu_release.errors import INTERNAL_ERROR

from ..helpers import user_exit_codes

ROOT = Path(__file__).resolve().parents[3]
DOCUMENTED = user_exit_codes()  # errors.EXIT_CODES (docs/reference/exit-codes.md) without 70
MAX_ERROR_LINES = 25
MAX_LINE = 500

# Profiles (ci: the default, fixed seed; long: a deeper search) are registered in tests/conftest.py.

IMAGES = ["training-cpu-pytorch", "training-xpu-pytorch", "pytorch-cpu-sdk"]
VERSIONS = ["25.03", "2.13.0", "25.04", "99.0"]
MANIFESTS = ["training-cpu-pytorch/25.03", "training-xpu-pytorch/25.03", "pytorch-cpu-sdk/2.13.0"]
CLOSED = (  # every endpoint a closed port on loopback: `lock --check` asks and is refused at once
    "registries:\n"
    "  hub: {host: '127.0.0.1:1', insecure: true}\n"
    "  public: {host: '127.0.0.1:1', insecure: true}\n"
    "  vpc: {hosts: {cn-beijing: '127.0.0.1:1', cn-wulanchabu: '127.0.0.1:1'}, insecure: true}\n"
)

NO_ENGINE = {"DOCKER_HOST": "tcp://127.0.0.1:1"}  # an engine that never answers: nothing is run

# --- what a user might type ---------------------------------------------------------------------

odd_chars = st.characters(categories=["Cc", "Zs", "Zl", "Zp", "Cf"]) | st.sampled_from("-=:/.\\@~^{}*?'\"")
TEXT = st.one_of(
    st.text(max_size=24),
    st.text(alphabet=odd_chars, max_size=12),
    st.sampled_from(["", " ", "-", "--", "--output=OUT", "-cfoo=bar", "--exec=OUT", "..", "../x", "/", "a/b",
                     ".yaml", "\x00", "\n", "25.03", "HEAD", "HEAD~1", "main", "-", "*", "~"]),
    st.integers(300, 6000).map(lambda n: "9" * n),  # huge numbers
    st.integers(200, 100_000).map(lambda n: "v" * n),  # very long strings
)  # fmt: skip

NAME = st.sampled_from(IMAGES) | TEXT
VERSION = st.sampled_from(VERSIONS) | TEXT
REF = st.builds(lambda n, v: f"{n}:{v}", NAME, VERSION) | TEXT
ADVISORIES = st.sampled_from(["osv", "osv/r.json", "manifests", "OUT", "nowhere"]) | TEXT
OUT = st.sampled_from(
    ["out/x.json", "-", "manifests", "new/dir/x.md", "/dev/full", "images", "link-loop", ""]
)


def commands() -> st.SearchStrategy[list[str]]:
    return st.one_of(
        st.lists(REF, max_size=3).map(lambda refs: ["validate", *refs]),
        REF.map(lambda r: ["render", r]),
        st.just(["render", "--all", "--check"]),
        st.sampled_from([["docs"], ["docs", "--check"]]),
        REF.map(lambda r: ["plan", r, "--json"]),
        st.tuples(REF, REF).map(lambda p: ["diff", *p]),
        st.tuples(REF, VERSION, TEXT).map(lambda t: ["new-version", t[0], "--from", t[1], "--set", t[2]]),
        st.just(["list", "--json"]),
        OUT.map(lambda o: ["schema", "-o", o]),
        TEXT.map(lambda t: ["from-tag", t]),
        st.builds(lambda n, v: f"{n}/{v}", NAME, VERSION).map(lambda t: ["from-tag", t]),
        TEXT.map(lambda t: ["changed", "--since", t]),
        st.lists(REF, max_size=3).map(lambda refs: ["order", *refs]),
        st.tuples(REF, st.sampled_from(["zh", "en"]) | TEXT, OUT).map(
            lambda t: ["notes", t[0], "--lang", t[1], "-o", t[2]]
        ),
        REF.map(lambda r: ["lock", "--check", r]),
        # The source is read first (a layout that is not there, a closed port): the target,
        # whatever is typed for it, is never reached nor written.
        st.tuples(REF, OUT | TEXT, TEXT).map(
            lambda t: ["mirror", t[0], "--from", f"oci:{t[1]}", "--to", t[2]]
        ),
        st.tuples(REF, OUT | TEXT).map(lambda t: ["mirror", t[0], "--to", f"oci:{t[1]}"]),
        st.tuples(REF, st.sampled_from(["isal:9", "zstd", "zstd:2", "zlib-ng:", "zlib:-1"]) | TEXT).map(
            lambda t: ["publish", t[0], "--dry-run", "--compression", t[1]]
        ),
        # watch and patch read the published releases at a closed port: each release says it
        # could not be checked; the advisories and the dates are what a user types.
        st.tuples(st.lists(REF, max_size=2), ADVISORIES, st.sampled_from(["--json", "--release", "-q"])).map(
            lambda t: ["watch", *t[0], "--advisories", t[1], t[2]]
        ),
        st.tuples(ADVISORIES, st.sampled_from(["2026-12-03", "1-1-1", "9999-12-31"]) | TEXT).map(
            lambda t: ["watch", "--advisories", t[0], "--today", t[1]]
        ),
        st.tuples(REF, ADVISORIES, st.sampled_from(["--json", "-q"])).map(
            lambda t: ["patch", t[0], "--advisories", t[1], t[2]]
        ),
        # A release line steered at closed ports: the reason, the record and the channel are read
        # before any endpoint is asked, and an endpoint that does not answer is exit 10.
        st.tuples(REF, TEXT, st.sampled_from([[], ["--json"], ["--record", "OUT"]])).map(
            lambda t: ["withdraw", t[0], "--reason", t[1], *t[2]]
        ),
        st.tuples(REF, st.sampled_from([[], ["--record", "manifests"]])).map(
            lambda t: ["reinstate", t[0], *t[1]]
        ),
        st.tuples(
            REF, st.sampled_from(["closed.yaml", "nope.yaml", "manifests", "registries.yaml "]) | OUT | TEXT
        ).map(lambda t: ["promote", t[0], "--from", t[1]]),
        # The evaluation: the engine (a closed port, NO_ENGINE) is asked only once the manifest,
        # its evaluation and --against are known good.
        REF.map(lambda r: ["evaluate", r]),
        st.tuples(REF, REF | TEXT).map(lambda t: ["evaluate", t[0], "--against", t[1], "--json"]),
        st.tuples(REF, TEXT).map(lambda t: ["release", t[0], "--dry-run", "--no-evaluate", t[1]]),
    )


# --- what a repository might hold ---------------------------------------------------------------


def _replace_line(text: str, at: int, value: str) -> str:
    lines = text.splitlines()
    at %= max(len(lines), 1)
    key = lines[at].split(":", 1)[0] if ":" in lines[at] else "version"
    lines[at] = f"{key}: {value}"
    return "\n".join(lines) + "\n"


Damage = Callable[[Path], None]


def _content(manifest: str, at: int, value: str) -> Damage:
    def apply(repo: Path) -> None:
        path = repo / "manifests" / f"{manifest}.yaml"
        path.write_text(_replace_line(path.read_text(), at, value), encoding="utf-8", errors="surrogatepass")

    return apply


def _raw(manifest: str, data: bytes) -> Damage:
    def apply(repo: Path) -> None:
        (repo / "manifests" / f"{manifest}.yaml").write_bytes(data)

    return apply


def _entry(where: str, shape: str) -> Damage:
    def apply(repo: Path) -> None:
        path = repo / where
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        if shape == "directory":
            path.mkdir()
        elif shape == "fifo":
            os.mkfifo(path)
        elif shape == "dangling":
            path.symlink_to(repo / "gone")
        elif shape == "loop":
            path.symlink_to(path.name)

    return apply


def _registries(value: str) -> Damage:
    def apply(repo: Path) -> None:
        (repo / "closed.yaml").write_text(_replace_line(CLOSED, 2, value), errors="surrogatepass")

    return apply


def _advisory(data: bytes) -> Damage:
    def apply(repo: Path) -> None:
        (repo / "osv").mkdir(exist_ok=True)
        (repo / "osv" / "r.json").write_bytes(data)

    return apply


def damages() -> st.SearchStrategy[Damage | None]:
    where = st.sampled_from(
        [f"manifests/{m}.yaml" for m in MANIFESTS]
        + ["manifests/training-cpu-pytorch/99.0.yaml", "manifests/training-cpu-pytorch", "manifests",
           "templates", "images/training-cpu-pytorch/25.03/Dockerfile", "registries.yaml", "closed.yaml",
           "docs/reference", "docs/reference/commands.md", "osv", "osv/r.json",
           "images/training-cpu-pytorch/vex.openvex.json", "out/releases/training-cpu-pytorch/25.03.watch"]
    )  # fmt: skip
    return st.one_of(
        st.none(),
        st.builds(_content, st.sampled_from(MANIFESTS), st.integers(0, 60), TEXT),
        st.builds(_raw, st.sampled_from(MANIFESTS), st.binary(max_size=300)),
        st.builds(_entry, where, st.sampled_from(["directory", "fifo", "dangling", "loop", "gone"])),
        st.builds(_registries, TEXT),
        st.builds(_advisory, st.binary(max_size=300)),
    )


# --- the property -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository as a user has it (a git checkout): copied again for every example."""
    dst = tmp_path_factory.mktemp("template") / "repo"
    dst.mkdir()
    for name in ("manifests", "templates", "images", "schema"):
        shutil.copytree(ROOT / name, dst / name)
    shutil.copy(ROOT / "registries.yaml", dst / "registries.yaml")
    (dst / "closed.yaml").write_text(CLOSED)
    (dst / "osv").mkdir()
    (dst / "osv" / "r.json").write_text(
        '{"id": "TEST-1", "published": "2026-01-01T00:00:00Z", "affected": [{"package": {"ecosystem": '
        '"PyPI", "name": "accelerate"}, "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, '
        '{"fixed": "1.6.0"}]}]}]}'
    )
    git = ["git", "-C", str(dst), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    return dst


@contextmanager
def sandbox(template: Path) -> Iterator[tuple[Path, Path]]:
    """A fresh copy of the repository inside an otherwise empty folder, as the working folder."""
    outer = Path(tempfile.mkdtemp(prefix="xpu-hyp-"))
    repo = outer / "repo"
    shutil.copytree(template, repo, symlinks=True)
    before = Path.cwd()
    os.chdir(repo)
    try:
        yield outer, repo
    finally:
        os.chdir(before)
        shutil.rmtree(outer, ignore_errors=True)


@given(argv=commands(), damage=damages())
def test_no_input_ends_in_an_internal_error(template: Path, argv: list[str], damage: Damage | None) -> None:
    dev_full = Path("/dev/full").stat()
    with sandbox(template) as (outer, repo):
        if damage is not None:
            damage(repo)
        argv = [a.replace("OUT", str(repo / "injected")) for a in argv]

        result = CliRunner().invoke(
            cli,
            ["--root", str(repo), "--registries", str(repo / "closed.yaml"), *argv],
            catch_exceptions=False,
            env=NO_ENGINE if argv[0] in ("evaluate", "release") else None,
        )

        errors = result.stderr.splitlines()
        assert result.exit_code != INTERNAL_ERROR, result.stderr[:2000]
        assert result.exit_code in DOCUMENTED, (result.exit_code, result.stderr[:2000])
        assert "Traceback" not in result.output
        assert len(errors) <= MAX_ERROR_LINES, result.stderr[:2000]
        assert all(len(line) <= MAX_LINE for line in errors), max(errors, key=len)[:300]
        assert sorted(p.name for p in outer.iterdir()) == ["repo"]  # nothing beside the copy
        assert not list(repo.glob("injected*"))  # no user text ran as a git option
    assert Path("/dev/full").stat().st_rdev == dev_full.st_rdev  # a device is written to, never replaced
    assert not (ROOT / "out" / "x.json").exists()
