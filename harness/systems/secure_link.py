"""A connection to a broker as the lab's clients make it: plain, TLS, SASL.

Gregor's own protocol requests (wire.py: ApiVersions, Metadata,
FindCoordinator) must reach a secured external cluster the way librdkafka
does, so they read the same settings the user gave every client
(--client-config): security.protocol, ssl.* and sasl.*. SASL PLAIN and
SCRAM-SHA-256/512 are spoken here (SaslHandshake v1, SaslAuthenticate v1);
other mechanisms get one line saying Gregor cannot probe with them.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import socket
import ssl
import struct

from ground.errors import GregorError
from harness.systems import kafka_codec

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


def protocol_of(security: dict | None) -> str:
    protocol = str((security or {}).get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in PROTOCOLS:
        raise GregorError(f"unknown security.protocol {protocol!r}; use one of {', '.join(PROTOCOLS)}")
    return protocol


@contextlib.contextmanager
def connect(host: str, port: int, timeout: float, security: dict | None = None):
    """A socket to host:port, wrapped in TLS and authenticated as `security` says."""
    protocol = protocol_of(security)
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        if protocol.endswith("SSL"):
            sock = tls_context(security or {}).wrap_socket(sock, server_hostname=host)
        if protocol.startswith("SASL"):
            authenticate(sock, host, port, security or {})
        yield sock
    finally:
        sock.close()


def tls_context(security: dict) -> ssl.SSLContext:
    """TLS as librdkafka's ssl.* settings describe it."""
    context = ssl.create_default_context(cafile=security.get("ssl.ca.location"))
    if str(security.get("enable.ssl.certificate.verification", "true")).lower() == "false":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif str(security.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
        context.check_hostname = False
    if security.get("ssl.certificate.location"):
        context.load_cert_chain(
            security["ssl.certificate.location"], security.get("ssl.key.location"), security.get("ssl.key.password")
        )
    return context


def mechanism_of(security: dict) -> str:
    mechanism = str(security.get("sasl.mechanism") or security.get("sasl.mechanisms") or "GSSAPI").upper()
    if mechanism not in MECHANISMS:
        raise GregorError(
            f"Gregor's own broker requests cannot authenticate with sasl.mechanism {mechanism}; "
            f"they speak {', '.join(MECHANISMS)}"
        )
    return mechanism


def authenticate(sock, host: str, port: int, security: dict) -> None:

    mechanism = mechanism_of(security)
    user, password = str(security.get("sasl.username", "")), str(security.get("sasl.password", ""))
    raw = mechanism.encode()
    data = kafka_codec.request(sock, host, port, SASL_HANDSHAKE, 1, struct.pack(">h", len(raw)) + raw, flexible=False)
    error = kafka_codec.read(data, ">h")
    if error:
        offered = [kafka_codec.string(data) for _ in range(max(kafka_codec.read(data, ">i"), 0))]
        raise GregorError(
            f"{host}:{port} refuses SASL {mechanism} (Kafka error {error}); it offers "
            f"{', '.join(m for m in offered if m) or 'nothing'}"
        )

    def exchange(message: bytes) -> bytes:
        body = struct.pack(">i", len(message)) + message
        try:
            answer = kafka_codec.request(sock, host, port, SASL_AUTHENTICATE, 1, body, flexible=False)
        except ConnectionError:  # some brokers (kfake) hang up instead of answering an error
            raise GregorError(
                f"{host}:{port}: SASL {mechanism} authentication failed as {user!r}: the broker "
                "closed the connection (wrong credentials?)"
            ) from None
        code = kafka_codec.read(answer, ">h")
        text = kafka_codec.string(answer)
        if code:
            raise GregorError(
                f"{host}:{port}: SASL {mechanism} authentication failed as {user!r}: {text or f'Kafka error {code}'}"
            )
        return answer.read(kafka_codec.read(answer, ">i"))

    if mechanism == "PLAIN":
        exchange(b"\0" + user.encode() + b"\0" + password.encode())
        return
    scram = Scram(mechanism, user, password)
    server_first = exchange(scram.client_first())
    server_final = exchange(scram.client_final(server_first))
    scram.verify(server_final)


class Scram:
    """The client side of SCRAM (RFC 5802) without channel binding."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None):
        self.hash = hashlib.sha256 if mechanism == "SCRAM-SHA-256" else hashlib.sha512
        self.user = user.replace("=", "=3D").replace(",", "=2C")
        self.password = password.encode()
        self.nonce = nonce or base64.b64encode(os.urandom(18)).decode()
        self.server_signature = b""

    def client_first_bare(self) -> str:
        return f"n={self.user},r={self.nonce}"

    def client_first(self) -> bytes:
        return f"n,,{self.client_first_bare()}".encode()

    def client_final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        fields = dict(item.split("=", 1) for item in text.split(","))
        if not fields.get("r", "").startswith(self.nonce):
            raise GregorError("SCRAM: the server's nonce does not extend ours")
        salted = hashlib.pbkdf2_hmac(self.hash().name, self.password, base64.b64decode(fields["s"]), int(fields["i"]))
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        stored_key = self.hash(client_key).digest()
        without_proof = f"c=biws,r={fields['r']}"
        message = f"{self.client_first_bare()},{text},{without_proof}".encode()
        signature = hmac.new(stored_key, message, self.hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        self.server_signature = hmac.new(server_key, message, self.hash).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        fields = dict(item.split("=", 1) for item in server_final.decode().split(","))
        if "e" in fields:
            raise GregorError(f"SCRAM: the server refused: {fields['e']}")
        if base64.b64decode(fields.get("v", "")) != self.server_signature:
            raise GregorError("SCRAM: the server's signature does not match (wrong server or password)")
