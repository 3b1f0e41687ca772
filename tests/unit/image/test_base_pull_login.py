"""The base image is pulled with the command's credentials, handed down (architecture.md): a
family release whose base is its own public endpoint pulls it with the login the command was
given, and no login goes to a base on another host."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from xpu_release.image.baseimage import pull_auth
from xpu_release.manifest import ImageSpec, Repo
from xpu_release.manifest.registries import load_registries
from xpu_release.oci.credentials import Credentials, CredentialStore

from ..helpers import MINIMAL, write_manifest

REGISTRIES = """\
registries:
  public: {role: public, host: 'public.example:5000', namespace: family}
  vpc: {role: vpc, host: 'vpc.{region}.example:5000', namespace: family, regions: [cn-beijing]}
  hub: {role: base, host: 'hub.example:5000', namespace: base}
"""
LOGIN = Credentials(username="ci", password="the-ci-password")


def _spec(repo: Path, registry: str) -> ImageSpec:
    (repo / "registries.yaml").write_text(REGISTRIES)
    text = MINIMAL.replace("registry: hub", f"registry: {registry}")
    write_manifest(repo, "demo", "1.0", text)
    return Repo(repo).load("demo", "1.0")


def test_a_base_at_the_release_s_own_endpoint_is_pulled_with_the_command_s_login(repo: Path) -> None:
    spec = _spec(repo, "public")
    store = CredentialStore(explicit=LOGIN, release_hosts=frozenset({"public.example:5000"}),
                            docker_config=repo / "no-docker-config")  # fmt: skip

    auth = pull_auth(spec, load_registries(repo), store)

    assert auth is not None
    assert (auth["username"], auth["password"]) == ("ci", "the-ci-password")


def test_no_login_goes_to_a_base_on_another_host_only_what_the_docker_config_holds_for_it(repo: Path) -> None:
    spec = _spec(repo, "hub")
    config = repo / "docker-config"
    config.mkdir()
    (config / "config.json").write_text(json.dumps(
        {"auths": {"hub.example:5000": {"auth": base64.b64encode(b"reader:hub-token").decode()}}}
    ))  # fmt: skip
    release_only = frozenset({"public.example:5000"})

    with_config = pull_auth(spec, load_registries(repo), CredentialStore(
        explicit=LOGIN, release_hosts=release_only, docker_config=config))  # fmt: skip
    without = pull_auth(spec, load_registries(repo), CredentialStore(
        explicit=LOGIN, release_hosts=release_only, docker_config=repo / "none"))  # fmt: skip

    assert with_config is not None
    assert (with_config["username"], with_config["password"]) == ("reader", "hub-token")
    assert without is None
