"""The SASL exchange of one connection (gateway/sasl.py), without sockets: SaslHandshake v0
(bare tokens) and v1 (SaslAuthenticate), each mechanism, re-authentication, and any bytes at
any step refused with a Step or Closing (the connection closes), never another error."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as HandshakeV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from martlet.gateway.sasl import Authenticator, Closing, SaslSettings, Step, Verifier
from martlet.protocol.codec import NO_PEER, encode_request
from martlet.protocol.scram import SCRAM_SHA_256, SCRAM_SHA_512, ClientExchange, Credential

STORE = {("alice", SCRAM_SHA_512): Credential.of_password(SCRAM_SHA_512, "secret", 4096),
         ("alice", SCRAM_SHA_256): Credential.of_password(SCRAM_SHA_256, "secret", 4096),
         ("bob", SCRAM_SHA_512): Credential.of_password(SCRAM_SHA_512, "bobs", 4096)}


def _authenticator(**kwargs: Any) -> Authenticator:
    return Authenticator(Verifier(SaslSettings(), lambda user, mechanism: STORE.get((user, mechanism))), NO_PEER,
                         **kwargs)


def _frame(entity: Any) -> bytearray:
    return bytearray(encode_request(entity, 7, "test")[4:])  # without the size prefix, as the reader gives it


def _take(gate: Authenticator, frame: bytes | bytearray) -> Step:
    return asyncio.run(gate.take(bytearray(frame)))


def test_plain_over_bare_tokens_after_a_v0_handshake() -> None:
    gate = _authenticator()
    assert _take(gate, _frame(HandshakeV0(mechanism="PLAIN"))).failed == ""
    step = _take(gate, b"\0alice\0secret")
    assert (step.principal, step.answer, step.failed) == ("User:alice", b"\0\0\0\0", "")  # an empty frame
    gate = _authenticator()
    _take(gate, _frame(HandshakeV0(mechanism="PLAIN")))
    step = _take(gate, b"\0alice\0wrong")
    assert (step.principal, step.answer) == (None, None) and "Invalid username or password" in step.failed


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_scram_over_bare_tokens(mechanism: str) -> None:
    gate = _authenticator()
    _take(gate, _frame(HandshakeV0(mechanism=mechanism)))
    client = ClientExchange(mechanism, "alice", "secret")
    first = _take(gate, client.first())
    assert first.answer is not None and first.principal is None
    final = _take(gate, client.final(first.answer[4:]))  # each token in a frame of its own
    assert final.principal == "User:alice" and final.answer is not None
    assert int.from_bytes(final.answer[:4], "big") == len(final.answer) - 4
    client.verify(final.answer[4:])


def test_a_re_authentication_keeps_its_principal_and_mechanism() -> None:
    gate = _authenticator(reauthenticating="User:alice", mechanism="PLAIN")
    _take(gate, _frame(HandshakeV0(mechanism="PLAIN")))
    step = _take(gate, b"\0bob\0bobs")
    assert step.principal is None and "another principal" in step.failed
    gate = _authenticator(reauthenticating="User:alice", mechanism="PLAIN")
    assert "re-authentication with SCRAM-SHA-512" in _take(gate, _frame(HandshakeV0(mechanism=SCRAM_SHA_512))).failed


def test_mechanisms_not_enabled_are_refused() -> None:
    gate = Authenticator(Verifier(SaslSettings(enabled_mechanisms=(SCRAM_SHA_512,)), lambda user, mechanism: None),
                         NO_PEER)
    assert "unsupported SASL mechanism PLAIN" in _take(gate, _frame(SaslHandshakeRequest(mechanism="PLAIN"))).failed


def test_requests_other_than_sasl_close_the_connection() -> None:
    from kio.schema.metadata.v12.request import MetadataRequest

    metadata = _frame(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                      include_topic_authorized_operations=False))
    with pytest.raises(Closing, match="METADATA v12 where SASL_HANDSHAKE was expected"):
        _take(_authenticator(), metadata)
    gate = _authenticator()
    _take(gate, _frame(SaslHandshakeRequest(mechanism="PLAIN")))
    with pytest.raises(Closing, match="where SASL_AUTHENTICATE was expected"):
        _take(gate, metadata)
    with pytest.raises(Closing, match="session of User:alice ended"):
        _take(_authenticator(reauthenticating="User:alice", mechanism="PLAIN", expired=True), metadata)


STEPS = st.sampled_from(["handshake", "v0", "authenticate", "raw"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(STEPS, st.binary(max_size=200)), min_size=1, max_size=5),
       st.sampled_from(["PLAIN", SCRAM_SHA_256, SCRAM_SHA_512, "GSSAPI", ""]))
def test_any_exchange_ends_in_a_step_or_closing(steps: list[tuple[str, bytes]], mechanism: str) -> None:
    gate = _authenticator()
    for kind, data in steps:
        if kind == "handshake":
            frame: bytes | bytearray = _frame(SaslHandshakeRequest(mechanism=mechanism or data.decode("latin-1")))
        elif kind == "v0":
            frame = _frame(HandshakeV0(mechanism=mechanism))
        elif kind == "authenticate":
            frame = _frame(SaslAuthenticateRequest(auth_bytes=data))
        else:
            frame = data
        try:
            step = _take(gate, frame)
        except Closing:
            return
        assert isinstance(step, Step)
        if step.failed:
            return
