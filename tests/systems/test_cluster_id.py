"""The cluster id handed to Kafka's storage tool must never look like an option."""

import uuid

from harness.systems.kafka import system as lab


def test_cluster_id_never_starts_with_a_dash(monkeypatch):
    dash_first = uuid.UUID(bytes=b"\xf8" + bytes(15))  # base64 of 0xf8.. starts with '-'
    plain = uuid.UUID(bytes=b"\x10" + bytes(15))
    draws = iter([dash_first, dash_first, plain])
    monkeypatch.setattr(lab.uuid, "uuid4", lambda: next(draws))
    cluster_id = lab.new_cluster_id()
    assert not cluster_id.startswith("-")
    assert cluster_id == "EAAAAAAAAAAAAAAAAAAAAA"


def test_cluster_id_is_22_url_safe_characters():
    for _ in range(200):
        cluster_id = lab.new_cluster_id()
        assert len(cluster_id) == 22 and not cluster_id.startswith("-")
