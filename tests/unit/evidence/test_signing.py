"""Signed provenance: DSSE envelopes made and checked with the user's key, which stays out of
every output."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from xpu_release.errors import ConfigError, VerifyFailed
from xpu_release.evidence.signing import (
    envelope,
    load_signer,
    load_verifier,
    open_envelope,
    pae,
    signed_by,
    statement_of,
)
from xpu_release.settings import Settings

STATEMENT = b'{"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"sha256":"ab"}}]}'


def write_key(folder: Path, key: object, password: bytes | None = None) -> tuple[Path, Path]:
    enc = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    private = folder / "key.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM,  # type: ignore[attr-defined]
                                          serialization.PrivateFormat.PKCS8, enc))  # fmt: skip
    public = folder / "key.pub"
    public.write_bytes(key.public_key().public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))  # fmt: skip
    return private, public


def test_pae_is_the_dsse_pre_authentication_encoding() -> None:
    # The DSSE specification's own example.
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


@pytest.mark.parametrize(
    "make", [ed25519.Ed25519PrivateKey.generate, lambda: ec.generate_private_key(ec.SECP256R1())]
)
def test_an_envelope_verifies_with_the_public_key_and_with_no_other(make: object, tmp_path: Path) -> None:
    private, public = write_key(tmp_path, make())  # type: ignore[operator]
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    _, other = write_key(other_dir, ed25519.Ed25519PrivateKey.generate())
    signer = load_signer(str(private))
    assert signer is not None

    doc = envelope(STATEMENT, signer)

    assert json.loads(doc)["payloadType"] == "application/vnd.in-toto+json"
    assert statement_of(doc) == STATEMENT
    assert signed_by(doc, load_verifier(str(public)))
    assert not signed_by(doc, load_verifier(str(other)))
    assert open_envelope(doc, load_verifier(str(public)), "here") == json.loads(STATEMENT)


def test_a_changed_payload_no_longer_verifies(tmp_path: Path) -> None:
    private, public = write_key(tmp_path, ed25519.Ed25519PrivateKey.generate())
    doc = json.loads(envelope(STATEMENT, load_signer(str(private))))  # type: ignore[arg-type]
    doc["payload"] = base64.b64encode(STATEMENT.replace(b"ab", b"cd")).decode()

    with pytest.raises(VerifyFailed, match="does not verify"):
        open_envelope(json.dumps(doc).encode(), load_verifier(str(public)), "vpc/cn-beijing")


def test_an_unsigned_provenance_is_named_as_such(tmp_path: Path) -> None:
    _, public = write_key(tmp_path, ed25519.Ed25519PrivateKey.generate())

    with pytest.raises(VerifyFailed, match="not signed"):
        open_envelope(STATEMENT, load_verifier(str(public)), "public")


def test_ed25519_envelopes_are_deterministic(tmp_path: Path) -> None:
    private, _ = write_key(tmp_path, ed25519.Ed25519PrivateKey.generate())
    signer = load_signer(str(private))
    assert signer is not None

    assert envelope(STATEMENT, signer) == envelope(STATEMENT, signer)  # a rerun attaches nothing new


def test_an_encrypted_key_takes_its_password_from_the_environment(
    tmp_path: Path,
) -> None:
    private, _ = write_key(tmp_path, ed25519.Ed25519PrivateKey.generate(), password=b"correct horse")
    settings = Settings.from_env({"XPU_RELEASE_SIGNING_KEY_PASSWORD": "correct horse"})

    with pytest.raises(ConfigError, match="XPU_RELEASE_SIGNING_KEY_PASSWORD") as missing:
        load_signer(str(private))

    assert load_signer(str(private), settings.signing_key_password) is not None
    assert "correct horse" not in str(missing.value)


def test_a_key_of_another_kind_is_refused_without_showing_it(tmp_path: Path) -> None:
    private, _ = write_key(tmp_path, rsa.generate_private_key(public_exponent=65537, key_size=2048))
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWJ5dGVz\n-----END PRIVATE KEY-----\n")

    with pytest.raises(ConfigError, match="Ed25519 or ECDSA P-256"):
        load_signer(str(private))
    with pytest.raises(ConfigError, match="not a PEM private key") as bad:
        load_signer(str(garbage))
    assert "c2VjcmV0" not in str(bad.value)


def test_an_sm2_key_is_refused_as_a_kind_we_cannot_use(tmp_path: Path) -> None:
    import subprocess

    key = tmp_path / "sm2.pem"
    subprocess.run(
        ["openssl", "genpkey", "-algorithm", "SM2", "-out", str(key)], check=True, capture_output=True
    )

    with pytest.raises(ConfigError, match="Ed25519 or ECDSA P-256"):
        load_signer(str(key))


def test_a_wrong_password_and_a_needless_one_are_named_as_such(
    tmp_path: Path,
) -> None:
    encrypted, _ = write_key(tmp_path, ed25519.Ed25519PrivateKey.generate(), password=b"correct horse")
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain, _ = write_key(plain_dir, ed25519.Ed25519PrivateKey.generate())
    password = "battery staple"

    with pytest.raises(ConfigError, match="does not decrypt this signing key") as wrong:
        load_signer(str(encrypted), password)
    with pytest.raises(ConfigError, match="is not encrypted; unset XPU_RELEASE_SIGNING_KEY_PASSWORD"):
        load_signer(str(plain), password)
    assert "battery" not in str(wrong.value)


@pytest.mark.parametrize("loader", [load_signer, load_verifier])
def test_a_key_path_that_is_a_fifo_or_a_directory_is_refused_at_once(tmp_path: Path, loader: object) -> None:
    import os

    fifo = tmp_path / "key.fifo"
    os.mkfifo(fifo)

    with pytest.raises(ConfigError, match="not a regular file"):
        loader(str(fifo))  # type: ignore[operator]
    with pytest.raises(ConfigError, match="is a directory"):
        loader(str(tmp_path))  # type: ignore[operator]


def test_no_key_means_no_signature() -> None:
    assert load_signer(None) is None
    assert Settings.from_env({}).signing_key is None


def test_the_documented_openssl_commands_make_a_key_pair_that_works(tmp_path: Path) -> None:
    import subprocess

    subprocess.run(
        ["openssl", "genpkey", "-algorithm", "ed25519", "-out", "key.pem"], cwd=tmp_path, check=True
    )
    subprocess.run(
        ["openssl", "pkey", "-in", "key.pem", "-pubout", "-out", "key.pub"], cwd=tmp_path, check=True
    )
    signer = load_signer(str(tmp_path / "key.pem"))
    assert signer is not None

    assert signed_by(envelope(STATEMENT, signer), load_verifier(str(tmp_path / "key.pub")))
