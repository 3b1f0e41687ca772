"""The committed tree is its own truth (issue 50): what the committed parents make on the stack
is what the committed children pin. The suite's own fixture re-locks a copy when this machine's
base differs; this check does not: a child lock made while its parent's folder was dirty, or
pinning a parent that no clean checkout produces, fails here, naming the file and the command
that mends it."""

from __future__ import annotations

import pytest

from .conftest import SDK, ArtifactServer, Cli, make_repo

pytestmark = pytest.mark.integration

CHILDREN = ("training-cpu-pytorch:25.03",)


def test_every_committed_lock_agrees_with_what_the_committed_parents_make(
    fixture_cli: Cli, artifact_server: ArtifactServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # fixture_cli has released the SDK from the committed files (re-locking only a base that this
    # machine's Debian mirror made differently: then the SDK's own check below fails first).
    committed = Cli(root=make_repo(tmp_path_factory.mktemp("committed") / "repo", artifact_server),
                    env=fixture_cli.env)  # fmt: skip
    for ref in (SDK, *CHILDREN):
        name, _, version = ref.partition(":")
        check = committed.run("lock", ref, "--check")
        assert check.returncode == 0, (
            f"images/{name}/{version}/requirements.lock does not pin what the committed tree makes on "
            f"the stack; mend it with `xpu-release lock {ref}` after releasing its parents "
            f"(`ci/release-local.sh`), and commit the locks together:\n{check.stderr}"
        )
