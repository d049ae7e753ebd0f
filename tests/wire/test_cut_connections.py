"""cut_connections: `ss -K` destroys exactly the node's established connections to the given ports
(here the host's own namespace stands in for a node: a real socket pair on loopback, no lab)."""

from __future__ import annotations

import socket
import subprocess

import pytest

from ground.errors import GregorError
from harness.wire_relay import cut_connections


class HostNode:
    name = "host"

    def exec(self, argv, check=True, timeout=30, stdin=None):
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)


def test_it_cuts_the_connections_to_the_port_and_not_the_ones_accepted_on_it():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        try:
            assert cut_connections(HostNode(), [f"127.0.0.1:{port}"]) == 1  # the client's side only
            client.settimeout(2)
            with pytest.raises(OSError):  # destroyed: aborted, not a clean end of stream
                client.recv(1)
            assert cut_connections(HostNode(), [f"127.0.0.1:{port}"]) == 0
        finally:
            client.close()
            accepted.close()


def test_a_node_without_ss_support_is_one_line():
    class Refusing(HostNode):
        def exec(self, argv, check=True, timeout=30, stdin=None):
            return subprocess.CompletedProcess(argv, 1, "", "ss: unknown option -- K\n")

    with pytest.raises(GregorError, match="ss -K could not cut"):
        cut_connections(Refusing(), ["10.0.0.1:9092"])
