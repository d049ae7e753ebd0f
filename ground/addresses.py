"""host:port, as users and brokers write it."""

from __future__ import annotations

from ground.errors import GregorError


def split_server(server: str) -> tuple[str, int]:
    host, sep, port = server.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise GregorError(f"bad bootstrap server {server!r}: give host:port, e.g. 10.0.0.5:9092")
    return host.strip("[]"), int(port)
