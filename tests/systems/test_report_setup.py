"""The report's setup says which system ran, at which version, on what
storage, and which transaction protocol the brokers and the clients speak."""

from __future__ import annotations

import json

from reports.render import setup_section
from reports.stored_run import load_run


def setup_of(tmp_path, setup: dict, **test) -> str:
    (tmp_path / "test.json").write_text(
        json.dumps({"system": setup["system"], "version": setup["version"], "setup": setup, **test})
    )
    return setup_section(load_run(tmp_path))


def test_kafka_4_shows_the_brokers_transaction_version_and_what_librdkafka_speaks(tmp_path):
    page = setup_of(
        tmp_path,
        {
            "backend": "local",
            "system": "kafka",
            "version": "4.4.0",
            "storage": "local log directories (KRaft)",
            "controllers": "3 dedicated (k1..k3)",
            "transaction.version": 2,
        },
        versions={"librdkafka": "2.12.1"},
    )
    assert "kafka 4.4.0" in page and "3 dedicated (k1..k3)" in page
    assert '<div class="k">transaction protocol</div>' in page
    assert "2 (the brokers&#x27; transaction.version)" in page
    assert (
        "librdkafka 2.12.1, under confluent-kafka) do not implement transaction protocol v2 (KIP-890) and "
        "use the classic protocol" in page
    )


def test_tansu_shows_its_storage_and_no_transaction_row(tmp_path):
    page = setup_of(
        tmp_path,
        {
            "backend": "local",
            "system": "tansu",
            "version": "0.6.0",
            "storage": "PostgreSQL 15 shared by every broker (on the controller host)",
        },
    )
    assert "tansu 0.6.0" in page and "PostgreSQL 15 shared by every broker" in page
    assert "transaction protocol" not in page


def test_kfake_shows_its_brokers_in_one_process(tmp_path):
    page = setup_of(
        tmp_path,
        {
            "backend": "local",
            "system": "kfake",
            "version": "v0.0.0-20260918054303-01f206a7e32c",
            "storage": "in memory",
            "brokers": "3 in one process (no replication)",
            "transaction.version": 2,
        },
    )
    assert '<div class="k">brokers</div><div class="v">3 in one process (no replication)</div>' in page


def test_the_java_client_and_the_protocol_its_brokers_recorded(tmp_path):
    page = setup_of(
        tmp_path,
        {"backend": "local", "system": "kafka", "version": "4.4.0", "transaction.version": 2},
        client={"library": "java", "library.version": "4.4.0"},
        transaction_protocol={"protocol": "v2", "transactional_ids": {"v2": 4, "classic": 0}},
    )
    assert '<div class="k">client</div><div class="v">Kafka&#x27;s Java client (kafka-clients 4.4.0)</div>' in page
    assert "the brokers&#x27; transaction log shows the run&#x27;s transactional ids used v2 (4 v2, 0 classic)" in page
    assert "do not implement transaction protocol v2" not in page


def test_a_run_before_the_java_client_shows_librdkafka(tmp_path):
    page = setup_of(
        tmp_path, {"backend": "local", "system": "kafka", "version": "3.9.1"}, versions={"librdkafka": "2.5.0"}
    )
    assert '<div class="k">client</div><div class="v">librdkafka 2.5.0 (under confluent-kafka)</div>' in page
