"""OAUTHBEARER tokens (gateway/oauth.py): a JWT signed by a key of the JWKS, unexpired, with the
expected issuer and audience, names its principal; anything else is refused with a reason:
another signer, alg none, a symmetric algorithm, an unknown key, expiry, the wrong issuer or
audience, no principal claim, garbage. A JWKS file that changes is read again."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from martlet.gateway.oauth import TokenRefused, Tokens

ISSUER, AUDIENCE = "https://idp.test", "martlet"


def _jwks(path: Path, *keys: tuple[str, Any]) -> None:
    entries = []
    for kid, key in keys:
        algorithm = RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else ECAlgorithm
        entry = json.loads(algorithm.to_jwk(key.public_key()))
        entries.append(entry | {"kid": kid, "use": "sig"})
    path.write_text(json.dumps({"keys": entries}))


def _token(key: Any, kid: str, algorithm: str = "RS256", **claims: Any) -> str:
    now = int(time.time())
    body = {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 300} | claims
    return jwt.encode({k: v for k, v in body.items() if v is not None}, key, algorithm=algorithm,
                      headers={"kid": kid})


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Any, Any]:
    signer = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other = ec.generate_private_key(ec.SECP256R1())
    path = tmp_path / "jwks.json"
    _jwks(path, ("k1", signer), ("k2", other))
    return path, signer, other


def _check(tokens: Tokens, token: str) -> tuple[str, int]:
    return asyncio.run(tokens.check(token))


def test_a_token_of_a_known_signer_names_its_principal(keys: tuple[Path, Any, Any]) -> None:
    path, signer, other = keys
    tokens = Tokens(str(path), ISSUER, (AUDIENCE,))
    principal, expiry_ms = _check(tokens, _token(signer, "k1"))
    assert principal == "User:alice" and expiry_ms > time.time() * 1000
    assert _check(tokens, _token(other, "k2", "ES256", sub="bob"))[0] == "User:bob"
    assert _check(Tokens(str(path), sub_claim="client_id"), _token(signer, "k1", client_id="svc"))[0] == "User:svc"


@pytest.mark.parametrize(("change", "reason"), [
    ({"exp": int(time.time()) - 3600}, "expired"),
    ({"iss": "https://evil.test"}, "Invalid issuer"),
    ({"aud": "someone-else"}, "Audience doesn.t match"),
    ({"sub": None}, "no 'sub' claim"),
    ({"exp": None}, "exp"),
    ({"nbf": int(time.time()) + 3600}, "not yet valid"),
])
def test_claims_that_do_not_hold_are_refused(keys: tuple[Path, Any, Any], change: dict[str, Any], reason: str) -> None:
    path, signer, _ = keys
    with pytest.raises(TokenRefused, match=reason):
        _check(Tokens(str(path), ISSUER, (AUDIENCE,)), _token(signer, "k1", **change))


def test_tokens_not_signed_by_a_key_of_the_jwks_are_refused(keys: tuple[Path, Any, Any]) -> None:
    path, signer, _ = keys
    tokens = Tokens(str(path))
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(TokenRefused, match="Signature verification failed"):
        _check(tokens, _token(stranger, "k1"))
    with pytest.raises(TokenRefused, match="no key 'k9'"):
        _check(tokens, _token(signer, "k9"))
    with pytest.raises(TokenRefused, match="algorithm 'none'"):
        _check(tokens, jwt.encode({"sub": "alice", "exp": int(time.time()) + 60}, None, algorithm="none",
                                  headers={"kid": "k1"}))
    with pytest.raises(TokenRefused, match="algorithm 'HS256'"):  # the public key used as an HMAC secret
        _check(tokens, _token(b"k" * 32, "k1", "HS256"))
    for garbage in ("", "a.b.c", "not a token", "eyJhbGciOiJSUzI1NiJ9..."):
        with pytest.raises(TokenRefused):
            _check(tokens, garbage)


def test_a_changed_jwks_file_is_read_again(keys: tuple[Path, Any, Any]) -> None:
    path, signer, _ = keys
    tokens = Tokens(str(path))
    assert _check(tokens, _token(signer, "k1"))[0] == "User:alice"
    rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _jwks(path, ("k3", rotated))
    assert _check(tokens, _token(rotated, "k3"))[0] == "User:alice"
    with pytest.raises(TokenRefused, match="no key 'k1'"):
        _check(tokens, _token(signer, "k1"))


def test_unsecured_tokens_only_where_enabled(keys: tuple[Path, Any, Any]) -> None:
    path, signer, _ = keys
    unsigned = jwt.encode({"sub": "dev", "exp": int(time.time()) + 60}, None, algorithm="none")
    assert _check(Tokens("", unsecured=True), unsigned)[0] == "User:dev"
    with pytest.raises(TokenRefused, match="only unsecured tokens"):
        _check(Tokens("", unsecured=True), _token(signer, "k1"))
