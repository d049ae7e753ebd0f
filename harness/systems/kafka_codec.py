"""The Kafka wire format: encoding and decoding, and one request/response
exchange on a connection someone else opened.

Kept apart from the transports (secure_link.py opens plain, TLS or SASL
connections and authenticates with these frames; wire.py asks the brokers
its questions), so that neither imports the other.
"""

from __future__ import annotations

import io
import itertools
import socket
import struct

from ground.errors import GregorError

CLIENT_ID = b"gregor"
_correlation = itertools.count(1)


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_uvarint(buf: io.BytesIO) -> int:
    shift = result = 0
    while True:
        byte = buf.read(1)[0]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result
        shift += 7


def read(buf: io.BytesIO, fmt: str):
    size = struct.calcsize(fmt)
    return struct.unpack(fmt, buf.read(size))[0]


def string(buf: io.BytesIO) -> str | None:
    length = read(buf, ">h")
    return None if length < 0 else buf.read(length).decode()


def request(
    sock,
    host: str,
    port: int,
    api_key: int,
    version: int,
    body: bytes,
    flexible: bool,
    flexible_response: bool | None = None,
) -> io.BytesIO:
    correlation = next(_correlation) & 0x7FFFFFFF
    header = struct.pack(">hhih", api_key, version, correlation, len(CLIENT_ID)) + CLIENT_ID
    if flexible:
        header += b"\x00"  # no tagged fields
    payload = header + body
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    data = io.BytesIO(recv_exact(sock, size))
    if read(data, ">i") != correlation:
        raise GregorError(f"{host}:{port} answered a different request")
    if flexible if flexible_response is None else flexible_response:
        read_uvarint(data)  # response header tagged fields
    return data


def recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks += chunk
    return bytes(chunks)


def int32_array(buf: io.BytesIO) -> list[int]:
    count = read(buf, ">i")
    return [read(buf, ">i") for _ in range(max(count, 0))]


def compact_string(buf: io.BytesIO) -> str | None:
    length = read_uvarint(buf) - 1
    return None if length < 0 else buf.read(length).decode()


def skip_tags(buf: io.BytesIO) -> None:
    for _ in range(read_uvarint(buf)):
        read_uvarint(buf)
        buf.read(read_uvarint(buf))
