"""Signed provenance: a DSSE envelope (https://github.com/secure-systems-lab/dsse) around the
in-toto statement, signed with a key the user gives.

Keys are PEM files: a PKCS#8 private key (Ed25519 or ECDSA P-256; encrypted ones take their
password from ``XPU_RELEASE_SIGNING_KEY_PASSWORD``) to sign, its public key (SubjectPublicKeyInfo)
to verify. The key's path may be named on the command line or in ``XPU_RELEASE_SIGNING_KEY``;
its bytes and its password never leave this module: not in argv, logs, errors or documents.
Ed25519 signatures are deterministic, so the same statement and key give the same envelope (a
rerun attaches nothing new); ECDSA ones are not, which is why a published envelope is reused.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, VerifyFailed
from ..guard.limits import MAX_KEY_BYTES
from ..guard.reading import loads, read_file
from ..oci.store import canonical_json
from ..secrets import register
from ..settings import KEY_PASSWORD_ENV as PASSWORD_ENV

ENVELOPE_TYPE = "application/vnd.dsse.envelope.v1+json"
PAYLOAD_TYPE = "application/vnd.in-toto+json"


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what is signed, never the bare payload."""
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def _keyid(public: Any) -> str:
    from cryptography.hazmat.primitives import serialization

    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(der).hexdigest()


@dataclass(frozen=True)
class Signer:
    key: Any  # an Ed25519 or ECDSA P-256 private key (cryptography)
    keyid: str

    def sign(self, message: bytes) -> bytes:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        if isinstance(self.key, ec.EllipticCurvePrivateKey):
            return bytes(self.key.sign(message, ec.ECDSA(hashes.SHA256())))
        return bytes(self.key.sign(message))

    def verifier(self) -> Verifier:
        return Verifier(key=self.key.public_key(), keyid=self.keyid)


@dataclass(frozen=True)
class Verifier:
    key: Any  # the matching public key
    keyid: str

    def verify(self, message: bytes, signature: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        try:
            if isinstance(self.key, ec.EllipticCurvePublicKey):
                self.key.verify(signature, message, ec.ECDSA(hashes.SHA256()))
            else:
                self.key.verify(signature, message)
        except InvalidSignature:
            return False
        return True


def _supported(key: Any, path: Path, what: str) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    ok = isinstance(key, (ed25519.Ed25519PrivateKey, ed25519.Ed25519PublicKey)) or (
        isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey))
        and isinstance(key.curve, ec.SECP256R1)
    )
    if not ok:
        msg = f"{path}: the {what} must be Ed25519 or ECDSA P-256"
        raise ConfigError(msg)


def _key_bytes(file: Path, what: str) -> bytes:
    """The bytes of a key file: a regular file only (a FIFO or a device would hang or never end),
    of a PEM key's size."""
    return read_file(file, what=f"{file}: the {what}", limit=MAX_KEY_BYTES, error=ConfigError)


def load_signer(path: str | None, password: str | None = None) -> Signer | None:
    """The signing key at ``path`` (``--signing-key`` or ``$XPU_RELEASE_SIGNING_KEY``, as the
    CLI read them), decrypted with ``password`` (``$XPU_RELEASE_SIGNING_KEY_PASSWORD``); None
    when no key is named."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    if not path:
        return None
    file = Path(path)
    register(password)
    data = _key_bytes(file, "signing key")
    try:
        key = serialization.load_pem_private_key(data, password.encode() if password else None)
    except UnsupportedAlgorithm:
        msg = f"{file}: the signing key is of a kind this tool cannot use; it must be Ed25519 or ECDSA P-256"
        raise ConfigError(msg) from None
    except (ValueError, TypeError) as exc:
        # The library's message says what is wrong with the file, never what is in it.
        said = str(exc).lower()
        if "incorrect password" in said or "could not decrypt" in said:
            msg = f"{file}: the password in {PASSWORD_ENV} does not decrypt this signing key"
        elif "key is not encrypted" in said:
            msg = f"{file}: the signing key is not encrypted; unset {PASSWORD_ENV}"
        elif "key is encrypted" in said:
            msg = f"{file}: the signing key is encrypted; set its password in {PASSWORD_ENV}"
        else:
            msg = f"{file}: not a PEM private key xpu-release can use ({type(exc).__name__})"
        raise ConfigError(msg) from None
    _supported(key, file, "signing key")
    return Signer(key=key, keyid=_keyid(key.public_key()))


def load_verifier(path: str) -> Verifier:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    file = Path(path)
    data = _key_bytes(file, "public key")
    try:
        key = serialization.load_pem_public_key(data)
    except UnsupportedAlgorithm:
        msg = f"{file}: the public key is of a kind this tool cannot use; it must be Ed25519 or ECDSA P-256"
        raise ConfigError(msg) from None
    except (ValueError, TypeError):
        msg = f"{file}: not a PEM public key (SubjectPublicKeyInfo)"
        raise ConfigError(msg) from None
    _supported(key, file, "public key")
    return Verifier(key=key, keyid=_keyid(key))


# The envelope's signatures carry an empty ``keyid``, as ``cosign attest`` writes them: cosign's
# bundle verifier hands the DSSE library the public key, which derives a key id of its own (an
# SSH-style ``SHA256:…`` fingerprint) and skips every signature whose non-empty keyid differs.
# Ours was ``sha256:<hex of the DER>``, and cosign >= 2.6.3 rejected the bundle for it
# (tests/integration/test_interop.py runs cosign). The key is named by the bundle's hint instead.
KEYID = ""


def envelope(statement: bytes, signer: Signer) -> bytes:
    sig = signer.sign(pae(PAYLOAD_TYPE, statement))
    doc = {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(statement).decode(),
        "signatures": [{"keyid": KEYID, "sig": base64.b64encode(sig).decode()}],
    }
    return canonical_json(doc)


def names_no_key(document: bytes) -> bool:
    """Every signature of the envelope has an empty (or no) ``keyid``: what cosign's verifiers
    accept whatever key id they derive. False for anything that is not such an envelope."""
    try:
        sigs = loads(document).get("signatures")
    except (ValueError, AttributeError):
        return False
    return isinstance(sigs, list) and all(isinstance(s, dict) and s.get("keyid", "") == KEYID for s in sigs)


def is_envelope(document: bytes) -> bool:
    try:
        data = loads(document)
    except ValueError:
        return False
    return isinstance(data, dict) and "payloadType" in data and "signatures" in data


def statement_of(document: bytes) -> bytes | None:
    """The in-toto statement of a provenance document, signed (an envelope) or not; None for an
    envelope without a readable payload."""
    if not is_envelope(document):
        return document
    payload = loads(document).get("payload")
    if not isinstance(payload, str):
        return None
    try:
        return base64.b64decode(payload, validate=True)
    except ValueError:
        return None


def signed_by(document: bytes, verifier: Verifier) -> bool:
    """``document`` is an envelope of an in-toto statement with a valid signature by the key."""
    if not is_envelope(document):
        return False
    data = loads(document)
    if data.get("payloadType") != PAYLOAD_TYPE:
        return False
    try:
        payload = base64.b64decode(data["payload"], validate=True)
        sigs = [base64.b64decode(s["sig"], validate=True) for s in data["signatures"]]
    except (KeyError, TypeError, ValueError):
        return False
    return any(verifier.verify(pae(PAYLOAD_TYPE, payload), s) for s in sigs)


def open_envelope(
    document: bytes, verifier: Verifier, where: str, what: str = "provenance"
) -> dict[str, Any]:
    """The verified statement of a signed ``what`` (the provenance, the VEX), or a VerifyFailed
    saying why not."""
    if not is_envelope(document):
        msg = f"{where}: the {what} is not signed (no DSSE envelope)"
        raise VerifyFailed(msg)
    if not signed_by(document, verifier):
        msg = f"{where}: the {what}'s signature does not verify with key {verifier.keyid[:19]}"
        raise VerifyFailed(msg)
    statement = statement_of(document)
    try:
        data = loads(statement) if statement is not None else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        msg = f"{where}: the signed {what}'s payload is not an in-toto statement"
        raise VerifyFailed(msg)
    return data
