"""SCRAM (RFC 5802, with SHA-256 and SHA-512 as RFC 7677 and Kafka use them): the credential a
user store keeps, the server's side of an exchange and the client's.

Only the standard library's primitives are used (PBKDF2, HMAC, the hashes, a constant-time
compare); this module strings them together as the RFC says. A credential holds the salt,
the iteration count and two keys derived from the salted password (StoredKey, ServerKey),
never the password: kept as Kafka keeps it in ZooKeeper,
"salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>".
No channel binding ("n,," only) and no extensions but Kafka's `tokenauth`, which is refused
(Martlet has no delegation tokens), as Kafka's ScramSaslServer does.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

SCRAM_SHA_256, SCRAM_SHA_512 = "SCRAM-SHA-256", "SCRAM-SHA-512"
HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
ITERATIONS_MIN, ITERATIONS_MAX = 4096, 16384  # Kafka's bounds (ScramMechanism.minIterations, its max)
NONCE_BYTES = 24
GS2_HEADER = "n,,"  # no channel binding, no authorization id


class ScramError(Exception):
    """The exchange failed: a malformed message, an unknown user, a wrong proof. The text is
    safe to show (it holds no secret)."""


@dataclass(frozen=True, slots=True)
class Credential:
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __str__(self) -> str:
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},server_key={_b64(self.server_key)},"
                f"iterations={self.iterations}")

    @classmethod
    def parse(cls, mechanism: str, text: str) -> Credential:
        """The credential as the store keeps it; ValueError if it is not one."""
        fields = dict(item.partition("=")[::2] for item in text.split(","))
        try:
            return cls(mechanism, _unb64(fields["salt"]), _unb64(fields["stored_key"]), _unb64(fields["server_key"]),
                       int(fields["iterations"]))
        except (KeyError, ValueError, binascii.Error):
            raise ValueError(f"not a {mechanism} credential") from None

    @classmethod
    def of_salted(cls, mechanism: str, salt: bytes, salted_password: bytes, iterations: int) -> Credential:
        """The credential of a salted password (what AlterUserScramCredentials carries)."""
        name = HASHES[mechanism]
        client_key = hmac.digest(salted_password, b"Client Key", name)
        return cls(mechanism, salt, hashlib.new(name, client_key).digest(),
                   hmac.digest(salted_password, b"Server Key", name), iterations)

    @classmethod
    def of_password(cls, mechanism: str, password: str, iterations: int, salt: bytes | None = None) -> Credential:
        salt = secrets.token_bytes(32) if salt is None else salt
        return cls.of_salted(mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations)

    def matches(self, password: str) -> bool:
        """Whether `password` is the one this credential was made of (PLAIN's check); costs
        `iterations` rounds of PBKDF2, so callers run it off the event loop."""
        candidate = Credential.of_password(self.mechanism, password, self.iterations, self.salt)
        return hmac.compare_digest(candidate.stored_key, self.stored_key)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(Normalize(password), salt, i); SASLprep is left out, as Kafka's client leaves it."""
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)


class ServerExchange:
    """The server's side of one SCRAM exchange: `first` answers the client's first message,
    `final` its final one (ScramError if either fails). `user` is known after `first`."""

    def __init__(self, mechanism: str) -> None:
        self.mechanism = mechanism
        self.user = ""
        self._credential: Credential | None = None
        self._nonce = ""
        self._first_bare = ""
        self._server_first = ""

    def start(self, client_first: bytes) -> str:
        """Read the client's first message; the user it names (whose credential `first` needs)."""
        text = _text(client_first)
        gs2, sep, bare = _split_gs2(text)
        if not sep:
            raise ScramError("Invalid SCRAM client first message")
        authzid, user, nonce, extensions = _first_fields(gs2, bare)
        if extensions:
            raise ScramError(f"Unsupported extensions: {', '.join(sorted(extensions))}")
        if authzid and authzid != user:
            raise ScramError("Authentication failed: Client requested an authorization id that is different "
                             "from username")
        self.user, self._nonce, self._first_bare = user, nonce, bare
        return user

    def first(self, credential: Credential | None) -> bytes:
        """The server's first message, for the user's credential (None: no such user)."""
        if credential is None or credential.mechanism != self.mechanism:
            raise ScramError("Authentication failed: Invalid user credentials")
        self._credential = credential
        self._nonce += secrets.token_urlsafe(NONCE_BYTES)
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        return self._server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        """Check the client's proof; the server's final message (its signature)."""
        credential = self._credential
        if credential is None:
            raise ScramError("Invalid SCRAM exchange: a final message before the first")
        text = _text(client_final)
        without_proof, sep, proof_text = text.rpartition(",p=")
        fields = _fields(without_proof) if sep else {}
        if fields.get("c") != _b64(GS2_HEADER.encode()):
            raise ScramError("Invalid SCRAM client final message: channel binding")
        if fields.get("r") != self._nonce:
            raise ScramError("Invalid client nonce in the final client message.")
        try:
            proof = _unb64(proof_text)
        except (ValueError, binascii.Error):
            raise ScramError("Invalid SCRAM client final message: proof") from None
        name = HASHES[self.mechanism]
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.digest(credential.stored_key, auth_message, name)
        if len(proof) != len(signature):
            raise ScramError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(name, client_key).digest(), credential.stored_key):
            raise ScramError("Invalid client credentials")
        return f"v={_b64(hmac.digest(credential.server_key, auth_message, name))}".encode()


class ClientExchange:
    """The client's side (inter-broker calls, the native SDK): `first()`, then
    `final(server_first)`, then `verify(server_final)`; ScramError if the server is wrong."""

    def __init__(self, mechanism: str, user: str, password: str) -> None:
        self.mechanism, self.user, self.password = mechanism, user, password
        self._nonce = secrets.token_urlsafe(NONCE_BYTES)
        self._first_bare = f"n={_saslname(user)},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return (GS2_HEADER + self._first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = _text(server_first)
        fields = _fields(text)
        nonce, salt, iterations = fields.get("r", ""), fields.get("s", ""), fields.get("i", "")
        if not nonce.startswith(self._nonce) or not iterations.isdigit():
            raise ScramError("Invalid SCRAM server first message")
        name = HASHES[self.mechanism]
        salted = salted_password(self.mechanism, self.password, _unb64(salt), int(iterations))
        client_key = hmac.digest(salted, b"Client Key", name)
        without_proof = f"c={_b64(GS2_HEADER.encode())},r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        signature = hmac.digest(hashlib.new(name, client_key).digest(), auth_message, name)
        self._server_signature = hmac.digest(hmac.digest(salted, b"Server Key", name), auth_message, name)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        fields = _fields(_text(server_final))
        if "e" in fields:
            raise ScramError(f"the server refused: {fields['e']}")
        if not hmac.compare_digest(fields.get("v", ""), _b64(self._server_signature)):
            raise ScramError("the server's signature is wrong")


def _split_gs2(text: str) -> tuple[str, str, str]:
    """(gs2 header without its last comma, ",", the bare message) of a client's first message."""
    if not text.startswith(("n,", "y,")):  # "p=": channel binding, which Kafka does not offer
        return "", "", ""
    authzid_end = text.find(",", 2)
    if authzid_end < 0:
        return "", "", ""
    return text[:authzid_end], ",", text[authzid_end + 1:]


def _first_fields(gs2: str, bare: str) -> tuple[str, str, str, dict[str, str]]:
    authzid_field = gs2[2:]
    authzid = ""
    if authzid_field:
        if not authzid_field.startswith("a="):
            raise ScramError("Invalid SCRAM client first message")
        authzid = _unsaslname(authzid_field[2:])
    items = bare.split(",")
    if len(items) < 2 or not items[0].startswith("n=") or not items[1].startswith("r=") or len(items[1]) < 3:
        raise ScramError("Invalid SCRAM client first message")
    extensions = dict(item.partition("=")[::2] for item in items[2:])
    user = _unsaslname(items[0][2:])
    if not user:
        raise ScramError("Invalid SCRAM client first message: no user name")
    return authzid, user, items[1][2:], extensions


def _fields(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or len(key) != 1:
            raise ScramError("Invalid SCRAM message")
        found.setdefault(key, value)
    return found


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _unsaslname(text: str) -> str:
    if "=" in text.replace("=2C", "").replace("=3D", ""):
        raise ScramError("Invalid SCRAM user name")
    return text.replace("=2C", ",").replace("=3D", "=")


def _text(message: bytes) -> str:
    try:
        return message.decode()
    except UnicodeDecodeError:
        raise ScramError("Invalid SCRAM message: not UTF-8") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode(), validate=True)
