"""What a cluster serves, from its own ApiVersions answer: the workloads'
needs, the one-line refusal, the transaction protocol level, and the
ApiVersions v3 and v0 answers decoded from real bytes on a real socket."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from ground.addresses import split_server
from ground.errors import GregorError
from harness.systems import capabilities, kafka_codec, wire
from harness.systems.capabilities import END_TXN, INIT_PRODUCER_ID, JOIN_GROUP, TXN_OFFSET_COMMIT


def cluster(apis: dict[int, list[int]], features: dict | None = None) -> dict:
    return {"api_versions": {str(k): v for k, v in apis.items()}, "finalized_features": features or {}}


# Tansu 0.6.0's answer lacks EndTxn (26) but has the rest of what Gregor's clients send.
KAFKA_LIKE = {key: [0, 9] for key in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 19, 22, 24, 25, 26, 28)}
TANSU_LIKE = {key: versions for key, versions in KAFKA_LIKE.items() if key != END_TXN}


def test_transactional_workloads_need_end_txn_and_others_do_not():
    for workload in ("txn", "zombie", "eos"):
        assert END_TXN in capabilities.required_apis(workload)
    for workload in ("queue", "group"):
        assert END_TXN not in capabilities.required_apis(workload)


def test_needs_follow_the_client_settings():
    assert INIT_PRODUCER_ID in capabilities.required_apis("queue", idempotence=True)
    assert INIT_PRODUCER_ID not in capabilities.required_apis("queue", idempotence=False)
    assert JOIN_GROUP not in capabilities.required_apis("queue")
    assert JOIN_GROUP in capabilities.required_apis("queue", subscribe=True)
    assert TXN_OFFSET_COMMIT in capabilities.required_apis("eos")
    assert TXN_OFFSET_COMMIT in capabilities.required_apis("txn", subscribe=True)
    assert TXN_OFFSET_COMMIT not in capabilities.required_apis("txn")


def test_a_broker_without_end_txn_refuses_txn_in_one_line_naming_it():
    with pytest.raises(GregorError) as caught:
        capabilities.refuse_unservable(cluster(TANSU_LIKE), "tansu", "0.6.0", "txn")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("tansu 0.6.0 cannot serve the txn workload")
    assert "EndTxn (API key 26)" in message


def test_what_the_brokers_serve_passes():
    for workload in ("queue", "group", "txn", "zombie", "eos"):
        capabilities.refuse_unservable(cluster(KAFKA_LIKE), "kafka", "4.4.0", workload, subscribe=True)
    for workload in ("queue", "group"):
        capabilities.refuse_unservable(cluster(TANSU_LIKE), "tansu", "0.6.0", workload)


def test_transaction_version_is_the_finalized_level_and_absent_means_zero():
    assert capabilities.feature_level(cluster(KAFKA_LIKE, {"transaction.version": [2, 2]}), "transaction.version") == 2
    assert capabilities.feature_level(cluster(KAFKA_LIKE), "transaction.version") == 0


def test_apis_all_brokers_serve_are_the_narrowest_ranges():
    both = capabilities._narrowest([{0: [0, 11], 26: [0, 4]}, {0: [3, 9]}])
    assert both == {0: [3, 9]}


@pytest.mark.parametrize("bad", ["nohost", "host:", ":9092", "host:port"])
def test_bad_bootstrap_servers_say_what_to_give(bad):
    with pytest.raises(GregorError, match="give host:port"):
        split_server(bad)


# --- ApiVersions on the wire --------------------------------------------------------------


def _uv(value: int) -> bytes:
    return kafka_codec.uvarint(value)


def _v3_answer(apis: dict[int, tuple[int, int]], supported: dict, finalized: dict) -> bytes:
    body = struct.pack(">h", 0) + _uv(len(apis) + 1)
    for key, (low, high) in apis.items():
        body += struct.pack(">hhh", key, low, high) + b"\x00"
    body += struct.pack(">i", 0)

    def features(table: dict, first_is_max: bool) -> bytes:
        raw = _uv(len(table) + 1)
        for name, (low, high) in table.items():
            first, second = (high, low) if first_is_max else (low, high)
            raw += _uv(len(name) + 1) + name.encode() + struct.pack(">hh", first, second) + b"\x00"
        return raw

    tags = [(0, features(supported, False)), (1, struct.pack(">q", 7)), (2, features(finalized, True))]
    body += _uv(len(tags))
    for tag, raw in tags:
        body += _uv(tag) + _uv(len(raw)) + raw
    return body


class FakeBroker:
    """A socket that answers each request with the next canned body (one test's double)."""

    def __init__(self, bodies: list[bytes]):
        self.bodies = list(bodies)
        self.requests: list[tuple[int, int]] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while self.bodies:
            conn, _ = self.server.accept()
            with conn:
                size = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))[0]
                request = conn.recv(size, socket.MSG_WAITALL)
                key, version, correlation = struct.unpack(">hhi", request[:8])
                self.requests.append((key, version))
                answer = struct.pack(">i", correlation) + self.bodies.pop(0)
                conn.sendall(struct.pack(">i", len(answer)) + answer)


def test_api_versions_v3_reads_keys_and_features():
    broker = FakeBroker(
        [
            _v3_answer(
                {0: (0, 11), 26: (0, 5)},
                {"transaction.version": (0, 2)},
                {"transaction.version": (0, 2), "metadata.version": (1, 21)},
            )
        ]
    )
    answer = wire.api_versions("127.0.0.1", broker.port, timeout=5)
    assert broker.requests == [(18, 3)]
    assert answer["apis"] == {0: [0, 11], 26: [0, 5]}
    assert answer["supported_features"] == {"transaction.version": [0, 2]}
    assert answer["finalized_features"] == {"transaction.version": [0, 2], "metadata.version": [1, 21]}


def test_a_broker_without_v3_is_asked_again_with_v0():
    refusal = struct.pack(">hi", wire.UNSUPPORTED_VERSION, 0)
    v0 = struct.pack(">hi", 0, 2) + struct.pack(">hhh", 0, 0, 8) + struct.pack(">hhh", 3, 0, 9)
    broker = FakeBroker([refusal, v0])
    answer = wire.api_versions("127.0.0.1", broker.port, timeout=5)
    assert broker.requests == [(18, 3), (18, 0)]
    assert answer == {
        "apis": {0: [0, 8], 3: [0, 9]},
        "supported_features": {},
        "finalized_features": {},
        "request_version": 0,
    }
