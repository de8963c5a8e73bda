"""SCRAM (protocol/scram.py): RFC 7677's worked example, both sides of an exchange against each
other, and bad messages refused with ScramError only."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from martlet.protocol.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ClientExchange,
    Credential,
    ScramError,
    ServerExchange,
)

# RFC 7677 section 3: user "user", password "pencil"
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE_PART = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FINAL = ("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_the_server_side_gives_rfc_7677s_answers() -> None:
    credential = Credential.of_password(SCRAM_SHA_256, "pencil", 4096, SALT)
    server = ServerExchange(SCRAM_SHA_256)
    assert server.start(f"n,,n=user,r={CLIENT_NONCE}".encode()) == "user"
    first = server.first(credential).decode()
    assert first.startswith(f"r={CLIENT_NONCE}") and first.endswith(",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    # the RFC's server nonce, so that its client proof is the one to check
    server._nonce = CLIENT_NONCE + SERVER_NONCE_PART
    server._server_first = f"r={CLIENT_NONCE}{SERVER_NONCE_PART},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert server.final(CLIENT_FINAL.encode()) == SERVER_FINAL


def test_the_client_side_gives_rfc_7677s_proof() -> None:
    client = ClientExchange(SCRAM_SHA_256, "user", "pencil")
    client._nonce = CLIENT_NONCE
    client._first_bare = f"n=user,r={CLIENT_NONCE}"
    server_first = f"r={CLIENT_NONCE}{SERVER_NONCE_PART},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
    assert client.final(server_first).decode() == CLIENT_FINAL
    client.verify(SERVER_FINAL)
    with pytest.raises(ScramError):
        client.verify(b"v=" + base64.b64encode(b"\0" * 32))


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
@pytest.mark.parametrize(("user", "password", "given", "ok"), [
    ("alice", "secret", "secret", True), ("a,b=c", "p", "p", True), ("alice", "secret", "Secret", False)])
def test_an_exchange_succeeds_exactly_with_the_password(mechanism: str, user: str, password: str, given: str,
                                                        ok: bool) -> None:
    credential = Credential.of_password(mechanism, password, 4096)
    assert Credential.parse(mechanism, str(credential)) == credential
    assert credential.matches(given) is ok
    client, server = ClientExchange(mechanism, user, given), ServerExchange(mechanism)
    assert server.start(client.first()) == user
    proof = client.final(server.first(credential))
    if ok:
        client.verify(server.final(proof))
    else:
        with pytest.raises(ScramError, match="Invalid client credentials"):
            server.final(proof)


def test_a_replayed_final_message_fails_against_a_new_exchange() -> None:
    credential = Credential.of_password(SCRAM_SHA_512, "secret", 4096)
    client, server = ClientExchange(SCRAM_SHA_512, "alice", "secret"), ServerExchange(SCRAM_SHA_512)
    server.start(client.first())
    proof = client.final(server.first(credential))
    server.final(proof)
    again = ServerExchange(SCRAM_SHA_512)  # the same messages sent again: a new server nonce
    again.start(client.first())
    again.first(credential)
    with pytest.raises(ScramError, match="nonce"):
        again.final(proof)


@pytest.mark.parametrize("message", [
    b"", b"n,,", b"p=tls-unique,,n=a,r=x", b"n,,n=,r=abc", b"n,,n=a", b"n,,r=abc,n=a", b"n,a=bob,n=alice,r=abc",
    b"n,,n=a=b,r=abc", b"n,,n=a,r=abc,tokenauth=true", b"\xff\xfe", b"n,,n=a,r="])
def test_bad_first_messages_are_refused(message: bytes) -> None:
    with pytest.raises(ScramError):
        ServerExchange(SCRAM_SHA_256).start(message)


def test_no_credential_is_refused_as_bad_credentials() -> None:
    server = ServerExchange(SCRAM_SHA_256)
    server.start(b"n,,n=nobody,r=abc")
    with pytest.raises(ScramError, match="Invalid user credentials"):
        server.first(None)


@given(st.binary(max_size=300), st.binary(max_size=300))
def test_any_bytes_are_refused_with_a_scram_error_only(first: bytes, final: bytes) -> None:
    credential = Credential.of_password(SCRAM_SHA_256, "p", 4096, b"salt")
    server = ServerExchange(SCRAM_SHA_256)
    try:
        server.start(first)
        server.first(credential)
        server.final(final)
    except ScramError:
        return
    pytest.fail("random bytes passed a SCRAM exchange")
