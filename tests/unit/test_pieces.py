"""The small parts each stage is built from, without an engine or a registry."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest
import requests

from xpu_release.errors import RegistryAuthError
from xpu_release.image.lock import Lock, layers_from_report
from xpu_release.manifest import Repo
from xpu_release.oci.credentials import CredentialStore
from xpu_release.oci.registry import RetryPolicy
from xpu_release.oci.transport import authenticate
from xpu_release.release.model.record import EndpointRecord, ReleaseRecord
from xpu_release.secrets import redact
from xpu_release.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("attempt", "retry_after", "low", "high"),
    [
        (0, "3", 3.0, 3.0),
        (0, None, 0.1, 0.2),
        (3, None, 0.8, 1.6),
        (20, None, 2.5, 5.0),
        (0, "999", 20.0, 20.0),
    ],
)
def test_backoff_is_capped_jittered_and_honours_retry_after(
    attempt: int, retry_after: str | None, low: float, high: float
) -> None:
    policy = RetryPolicy(base_delay=0.2, max_delay=5.0)

    delays = {policy.delay(attempt, retry_after) for _ in range(50)}

    assert all(low <= d <= high for d in delays)


def _report(*items: tuple[str, str, list[str]]) -> dict[str, object]:
    return {
        "install": [
            {
                "metadata": {"name": name, "version": version, "requires_dist": requires},
                "download_info": {
                    "url": f"https://files.example.invalid/{name}-{version}-py3-none-any.whl",
                    "archive_info": {"hashes": {"sha256": name[0] * 64}},
                },
            }
            for name, version, requires in items
        ]
    }


def test_lock_groups_one_layer_per_pin_in_manifest_order() -> None:
    spec = Repo(ROOT).load_ref("pytorch-cpu-sdk:2.13.0")
    report = _report(
        ("torch", "2.13.0+cpu", ["filelock", "sympy>=1.13", 'nvidia-nccl; platform_system == "Windows"']),
        ("filelock", "3.0", []),
        ("sympy", "1.14.0", ["mpmath"]),
        ("mpmath", "1.3.0", []),
    )

    layers = layers_from_report(spec, report)

    assert [(layer.component, [p.name for p in layer.packages]) for layer in layers] == [
        ("torch", ["torch", "filelock", "mpmath", "sympy"]),
    ]


def test_what_a_later_pin_shares_with_an_earlier_one_stays_in_the_earlier_layer() -> None:
    spec = Repo(ROOT).load_ref("training-cpu-pytorch:25.03")
    report = _report(
        ("transformers", "4.49.0", ["filelock", "tokenizers", 'pytest; extra == "testing"']),
        ("filelock", "3.0", []),
        ("tokenizers", "0.21.0", []),
        ("accelerate", "1.5.2", ["torch", "psutil", "filelock"]),
        ("psutil", "7.0", []),
        ("ray", "2.43.0", ["filelock", "msgpack"]),
        ("msgpack", "1.1.0", []),
    )

    layers = layers_from_report(spec, report)

    assert [(layer.component, [p.name for p in layer.packages]) for layer in layers] == [
        ("transformers", ["transformers", "filelock", "tokenizers"]),
        ("ray", ["ray", "msgpack"]),
        ("accelerate", ["accelerate", "psutil"]),  # torch is the base's: not in any layer
    ]


def test_the_committed_lock_parses_and_renders_back_byte_for_byte() -> None:
    spec = Repo(ROOT).load_ref("training-cpu-pytorch:25.03")
    path = ROOT / "images" / "training-cpu-pytorch" / "25.03" / "requirements.lock"

    lock = Lock.parse(path.read_text(), "requirements.lock")

    assert lock.render(spec) == path.read_text()
    assert [layer.component for layer in lock.layers] == ["transformers", "ray", "accelerate"]
    assert ("torch", "2.13.0+cpu") in lock.provided
    assert all(len(p.sha256) == 64 for layer in lock.layers for p in layer.packages)


def test_a_hand_edited_lock_is_refused() -> None:
    from xpu_release.errors import LockError

    with pytest.raises(LockError, match="not a line of a lock written by xpu-release"):
        Lock.parse("# pins-sha256: x\n# layer a: a==1\nrequests\n", "requirements.lock")


def test_credentials_come_from_the_docker_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    auth = base64.b64encode(b"robot:s3cret-value").decode()
    (tmp_path / "config.json").write_text(json.dumps({"auths": {"127.0.0.1:15001": {"auth": auth}}}))
    store = CredentialStore.from_settings(Settings.from_env({"DOCKER_CONFIG": str(tmp_path)}))

    creds = store.for_host("127.0.0.1:15001")

    assert creds is not None
    assert (creds.username, creds.password) == ("robot", "s3cret-value")
    assert "s3cret-value" not in repr(creds)
    assert redact("login failed for s3cret-value") == "login failed for ***"
    assert store.for_host("elsewhere:5000") is None


@pytest.mark.parametrize(
    "content", ["[" * 5000 + "]" * 5000, "[]", '{"auths": "x"}', '{"auths": {"127.0.0.1:15001": []}}', "fifo"]
)
def test_a_docker_config_of_another_shape_holds_no_credentials(tmp_path: Path, content: str) -> None:
    path = tmp_path / "config.json"
    if content == "fifo":
        os.mkfifo(path)  # never opened: reading it would wait for a writer
    else:
        path.write_text(content)

    store = CredentialStore.from_settings(Settings.from_env({"DOCKER_CONFIG": str(tmp_path)}))

    assert store.for_host("127.0.0.1:15001") is None


def test_an_auth_that_is_not_base64_is_refused_without_echoing_it(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"auths": {"h:1": {"auth": "not base64!secret"}}}))
    store = CredentialStore.from_settings(Settings.from_env({"DOCKER_CONFIG": str(tmp_path)}))

    with pytest.raises(RegistryAuthError, match="the docker config's auth for h:1 is not base64") as refused:
        store.for_host("h:1")
    assert "secret" not in refused.value.message


def test_credentials_come_from_a_credential_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    helper = tmp_path / "docker-credential-fake"
    helper.write_text(
        '#!/bin/sh\nread host\necho "{\\"Username\\": \\"u-$host\\", \\"Secret\\": \\"helper-pw\\"}"\n'
    )
    helper.chmod(helper.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "config.json").write_text(json.dumps({"credHelpers": {"reg.example": "fake"}}))
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")  # where the helper program is found

    creds = CredentialStore.from_settings(Settings.from_env({"DOCKER_CONFIG": str(tmp_path)})).for_host(
        "reg.example"
    )

    assert creds is not None
    assert (creds.username, creds.password) == ("u-reg.example", "helper-pw")
    assert redact("helper-pw leaked") == "*** leaked"


def test_environment_credentials_win_over_the_docker_config_at_the_release_hosts_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = {
        "XPU_RELEASE_USERNAME": "ci",
        "XPU_RELEASE_PASSWORD": "from-env-pw",
        "DOCKER_CONFIG": str(tmp_path),
    }
    settings = Settings.from_env(env)  # an empty docker config
    store = CredentialStore.from_settings(
        settings, release_hosts=frozenset({"registry.example:443", "vpc.example"})
    )

    creds = store.for_host("vpc.example")

    assert creds is not None
    assert creds.username == "ci"
    assert redact("x from-env-pw y") == "x *** y"
    # Any other host that asks (a hub, a token realm, an attacker's redirect) gets nothing.
    assert store.for_host("evil.example") is None
    assert CredentialStore.from_settings(settings).for_host("vpc.example") is None


def _challenge(header: str) -> requests.Response:
    resp = requests.Response()
    resp.status_code = 401
    resp.headers["WWW-Authenticate"] = header
    return resp


@pytest.mark.parametrize(
    ("host", "insecure", "challenge", "refused"),
    [
        ("registry.example", True, 'Basic realm="r"', "over plain HTTP"),
        ("registry.example:5000", True, 'Bearer realm="http://registry.example/token"', "over plain HTTP"),
        (
            "registry.example",
            False,
            'Bearer realm="http://auth.example/token",service="s"',
            "https realm only",
        ),
        ("127.0.0.1:15001", False, 'Bearer realm="http://127.0.0.1:9/token"', "https realm only"),
    ],
    ids=["basic-over-http", "bearer-over-http", "http-realm", "http-realm-for-a-tls-loopback"],
)
def test_credentials_never_travel_in_cleartext(
    host: str, insecure: bool, challenge: str, refused: str
) -> None:
    from xpu_release.errors import RegistryAuthError
    from xpu_release.manifest.registries import Endpoint
    from xpu_release.oci.credentials import Credentials
    from xpu_release.oci.registry import RegistryClient

    ep = Endpoint(registry="public", role="public", region=None, host=host, namespace="ns", insecure=insecure)
    client = RegistryClient(ep, Credentials(username="u", password="never-sent-pw"))

    with pytest.raises(RegistryAuthError) as info:
        authenticate(client.t, _challenge(challenge), "repository:ns/x:pull")

    assert refused in info.value.message
    assert "never-sent-pw" not in info.value.message
    assert client.t.authorization(f"http://{host}/v2/", "repository:ns/x:pull") is None  # nothing earned


def test_a_release_record_round_trips_through_json() -> None:
    record = ReleaseRecord(
        ref="x:1", manifest="manifests/x/1.yaml", manifest_sha256="m", inputs_sha256="i",
        tested_image_id="sha256:c", digest="sha256:d", published_at="t", complete=True,
        floating_moved=("r/x:latest",),
        endpoints=(
            EndpointRecord(endpoint="public", host="h", version_ref="h/x:1",
                           floating_refs=("h/x:latest",), status="verified", digest="sha256:d"),
        ),
    )  # fmt: skip

    assert ReleaseRecord.from_json(json.loads(json.dumps(record.to_json()))) == record


@pytest.mark.parametrize("libyaml", [True, False], ids=["libyaml", "pure-python"])
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &x [1]\nb: *x\n", "anchors and aliases are not supported"),
        ("a: &a [*a]\n", "anchors and aliases are not supported"),
        ("a: !!python/name:os.system x\n", "is not allowed"),
        ("a: 1\na: 2\n", "duplicate key"),
        ("a: " + "[" * 600 + "]" * 600 + "\n", "nested deeper than 64 levels"),  # under libyaml's 1,000
    ],
)
def test_both_yaml_composers_refuse_the_same_things(
    monkeypatch: pytest.MonkeyPatch, libyaml: bool, text: str, message: str
) -> None:
    import yaml

    from xpu_release.manifest.yamlsrc import YamlProblems, loads

    if libyaml and not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML was built without libyaml here")
    monkeypatch.setattr(yaml, "__with_libyaml__", libyaml)

    with pytest.raises(YamlProblems) as refused:
        loads(text, "x.yaml")

    assert message in str(refused.value)
