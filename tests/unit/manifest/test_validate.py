"""`xpu-release validate`: every malformed manifest gets a located message, exit 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..helpers import MINIMAL, run, write_manifest

F = "manifests/demo/1.0.yaml"


def _sub(old: str, new: str) -> str:
    assert old in MINIMAL, old
    return MINIMAL.replace(old, new, 1)


ARTIFACT = """\
  blob:
    kind: artifact
    version: "1.0"
    url: https://example.invalid/blob.tar.gz
    sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
    format: tar.gz
    dest: /opt/blob
"""

# (case id, manifest text, expected message fragment — file:line:col where it matters)
MALFORMED: list[tuple[str, str | bytes, str]] = [
    (
        "unknown-key",
        MINIMAL + "compnents: {}\n",
        f"{F}:12:1: compnents: unknown key 'compnents'; did you mean 'components'?",
    ),
    (
        "unknown-nested-key",
        _sub("    version: 1.16.0", "    verison: 1.16.0"),
        f"{F}:11:5: components.six.verison: unknown key 'verison'; did you mean 'version'?",
    ),
    (
        "wrong-type",
        _sub("scenario: [training]", "scenario: training"),
        f"{F}:4:11: scenario: expected a list, got string 'training'",
    ),
    ("missing-field", _sub("framework: pytorch\n", ""), "missing required key 'framework'"),
    (
        "duplicate-key",
        _sub("framework: pytorch\n", "framework: pytorch\nframework: pytorch\n"),
        f"{F}:6:1: framework: duplicate key (first set on line 5)",
    ),
    (
        "version-with-space",
        _sub("version: 1.16.0", "version: '1.16.0 '"),
        f"{F}:11:14: components.six.version: '1.16.0 ' is not a valid version",
    ),
    (
        "env-name",
        MINIMAL + "env: {1BAD: x}\n",
        "env.1BAD: '1BAD' is not a valid environment variable name",
    ),
    (
        "oci-tag",
        MINIMAL + "floating_tags: ['-latest']\n",
        "floating_tags[0]: '-latest' is not a valid OCI tag",
    ),
    (
        "version-not-file-name",
        _sub('version: "1.0"', 'version: "2.0"'),
        f"{F}:2:10: version: '2.0' does not match the file name 1.0.yaml",
    ),
    ("unquoted-version", _sub('version: "1.0"', "version: 1.0"), "quote it: '1.0'"),
    (
        "python-tag",
        _sub("framework: pytorch", "framework: !!python/object/apply:os.system [id]"),
        "YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed",
    ),
    (
        "alias",
        _sub("framework: pytorch", "framework: &f pytorch\nother: *f"),
        "anchors and aliases are not supported in manifests",
    ),
    ("huge-file", MINIMAL + "#" * 300_000 + "\n", "the limit is 262144"),
    (
        "newline-in-env",
        MINIMAL + 'env: {A: "x\\nRUN curl evil"}\n',
        "env.A: contains U+000A (LINE FEED); a line break or control character is never allowed here",
    ),
    ("dollar-in-env", MINIMAL + 'env: {A: "$(id)"}\n', "env.A: '$(id)' is not a safe value"),
    (
        "shell-in-version",
        _sub("version: 1.16.0", "version: '1.16.0 && curl evil'"),
        "is not a valid version",
    ),
    (
        "not-pep440",
        _sub("version: 1.16.0", "version: abc"),
        "components.six.version: 'abc' is not a PEP 440 version",
    ),
    (
        "unknown-kind",
        _sub("kind: pip", "kind: pipp"),
        "components.six.kind: string 'pipp' is not one of base, artifact, pip; did you mean 'pip'?",
    ),
    (
        "bad-url",
        MINIMAL + ARTIFACT.replace("https://example.invalid", "ftp://example.invalid"),
        "components.blob.url: 'ftp://example.invalid/blob.tar.gz' is not a valid URL",
    ),
    (
        "bad-sha256",
        MINIMAL + ARTIFACT.replace("0123456789abcdef0123", "XYZ", 1),
        "components.blob.sha256:",
    ),
    (
        "artifact-missing-dest",
        MINIMAL + ARTIFACT.replace("    dest: /opt/blob\n", ""),
        "components.blob: missing required key 'dest'",
    ),
    (
        "relative-dest",
        MINIMAL + ARTIFACT.replace("dest: /opt/blob", "dest: opt/blob"),
        "components.blob.dest: 'opt/blob' is not an absolute path",
    ),
    (
        "missing-parent",
        _sub('version: "1.0"\n', 'version: "1.0"\nextends: "0.9"\n'),
        "extends: parent demo:0.9 does not exist",
    ),
    (
        "self-parent",
        _sub('version: "1.0"\n', 'version: "1.0"\nextends: "1.0"\n'),
        "extends: inheritance cycle: 1.0 → 1.0",
    ),
    ("image-not-folder", _sub("image: demo", "image: other"), "image: must be 'demo'"),
    ("bad-yaml", MINIMAL + "tools: [python\n", "invalid YAML"),
    (
        "base-component-kind",
        _sub("python: /usr/bin/python3}", "python: /usr/bin/python3, component: six}"),
        "base.component: 'six' is a pip component, not base",
    ),
    (
        "upgraded-unknown",
        MINIMAL + "release: {upgraded: [vllm]}\n",
        "release.upgraded[0]: 'vllm' is not a component of this image",
    ),
    ("reserved-env", MINIMAL + "env: {PATH: /x}\n", "env.PATH: PATH is set by the template"),
    (
        "same-package-twice",
        MINIMAL + "  six2:\n    kind: pip\n    package: Six\n    version: 1.16.0\n",
        "components.six2: installs 'six', already pinned by 'six'",
    ),
    (
        "unpinned-os-package",
        MINIMAL + "os_packages: [curl]\n",
        "os_packages[0]: 'curl' is not a pinned Debian package (name=version",
    ),
    ("empty-file", "", "file is empty"),
    ("not-a-mapping", "- a\n- b\n", "a manifest is a mapping of keys"),
    ("not-utf8", b"image: demo\ntitle: \xff\xfe\n", "not UTF-8"),
    (
        "empty-prose",
        _sub("title: {en: demo 1.0, zh: demo 1.0}", "title: {en: ' ', zh: demo 1.0}"),
        "title.en: is empty",
    ),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_malformed_manifest_is_reported_with_location_and_exit_2(
    repo: Path, text: str | bytes, expected: str
) -> None:
    path = repo / "manifests" / "demo" / "1.0.yaml"
    path.parent.mkdir(parents=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")

    result = run(repo, "validate")

    assert result.exit_code == 2, result.output
    assert expected in result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""


def test_at_least_twenty_malformed_cases() -> None:
    assert len(MALFORMED) >= 20


def test_every_problem_in_a_file_is_reported(repo: Path) -> None:
    text = MINIMAL.replace("scenario: [training]", "scenario: training") + "env: {1X: y}\nbogus: 1\n"
    write_manifest(repo, "demo", "1.0", text)

    result = run(repo, "validate", "demo:1.0")

    assert result.exit_code == 2
    assert "scenario: expected a list" in result.stderr
    assert "env.1X:" in result.stderr
    assert "bogus: unknown key" in result.stderr
    assert "3 problems found" in result.stderr


def test_inheritance_cycle_across_files_is_an_error(repo: Path) -> None:
    write_manifest(
        repo, "demo", "1.0", MINIMAL.replace('version: "1.0"\n', 'version: "1.0"\nextends: "1.1"\n')
    )
    write_manifest(repo, "demo", "1.1", 'image: demo\nversion: "1.1"\nextends: "1.0"\n')

    result = run(repo, "validate", "demo:1.1")

    assert result.exit_code == 2
    assert "inheritance cycle: 1.1 → 1.0 → 1.1" in result.stderr


def test_the_repository_manifests_are_valid(repo: Path) -> None:
    result = run(repo, "validate")

    assert result.exit_code == 0, result.stderr
    assert result.stderr.strip() == "3 manifests valid"


def test_a_bad_ref_is_a_usage_error_not_a_traceback(repo: Path) -> None:
    result = run(repo, "validate", "no-colon")

    assert result.exit_code == 3
    assert "'no-colon' is not NAME:VERSION" in result.stderr


def test_an_unknown_version_names_the_known_ones(repo: Path) -> None:
    result = run(repo, "validate", "training-xpu-pytorch:99.99")

    assert result.exit_code == 11
    assert "versions: 25.03" in result.stderr


def test_a_base_registry_that_the_registries_file_lacks_is_located(repo: Path) -> None:
    path = repo / "manifests" / "pytorch-cpu-sdk" / "2.13.0.yaml"
    path.write_text(path.read_text().replace("registry: hub", "registry: hubb"))

    result = run(repo, "validate")

    assert result.exit_code == 2
    assert (
        "manifests/pytorch-cpu-sdk/2.13.0.yaml:18:13: base.registry: 'hubb' is no registry of the "
        "registries file (known: hub, public, vpc); did you mean 'hub'?"
    ) in result.stderr


def test_an_image_folder_that_cannot_be_read_is_an_error_never_skipped(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As root no permission bit stops a read: the refusal the kernel would give is made here.
    folder = repo / "manifests" / "training-cpu-pytorch"
    real = Path.iterdir

    def refusing(self: Path) -> object:
        if self == folder:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "iterdir", refusing)
    checked = run(repo, "validate")
    listed = run(repo, "list")
    rendered = run(repo, "render", "--all", "--check")

    for result in (checked, listed, rendered):
        assert result.exit_code == 2, result.output
        assert "manifests/training-cpu-pytorch: cannot read this folder (Permission denied)" in result.stderr
    assert "valid" not in checked.stderr


def test_an_alias_in_the_registries_file_is_named_as_that_files_mistake(repo: Path, tmp_path: Path) -> None:
    override = tmp_path / "regs.yaml"
    override.write_text("registries:\n  public: &p {host: '127.0.0.1:1', insecure: true}\n  vpc: *p\n")

    result = run(repo, "--registries", str(override), "plan", "training-cpu-pytorch:25.03")

    assert result.exit_code == 3
    assert "anchors and aliases are not supported in regs.yaml" in result.stderr
    assert "in manifests" not in result.stderr


@pytest.mark.usefixtures("no_backoff")
def test_lock_check_with_no_registry_answering_is_exit_10(repo: Path, tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[3]
    lock = "images/training-cpu-pytorch/25.03/requirements.lock"
    (repo / lock).write_text((root / lock).read_text())
    closed = tmp_path / "closed.yaml"
    closed.write_text(
        "registries:\n  hub: {host: '127.0.0.1:1', insecure: true}\n"
        "  public: {host: '127.0.0.1:1', insecure: true}\n"
        "  vpc: {hosts: {cn-beijing: '127.0.0.1:1', cn-wulanchabu: '127.0.0.1:1'}, insecure: true}\n"
    )

    result = run(repo, "--registries", str(closed), "lock", "training-cpu-pytorch:25.03", "--check")

    assert result.exit_code == 10, result.output
    assert "does not answer" in result.stderr
