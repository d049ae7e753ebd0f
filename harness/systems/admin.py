"""Who leads what: partition leaders, ISRs, controller and coordinators.

Roles are asked of the cluster (admin-client metadata, DescribeQuorum,
FindCoordinator), never guessed from node names, because faults move them.
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from ground.errors import GregorError
from harness.systems import wire as kafka_wire

# Errors that mean "ask again shortly" (coordinator loading, election running).
_RETRIABLE_CODES = {5, 6, 7, 14, 15, 16, 103}


class KafkaAdmin:
    """A thin admin client over one lab's bootstrap servers."""

    def __init__(self, bootstrap_servers: str, timeout: float = 10, client_config: dict | None = None):
        self.bootstrap_servers = bootstrap_servers
        self.timeout = timeout
        self.client_config = dict(client_config or {})
        self._client = AdminClient(
            {
                **self.client_config,  # security settings of the lab's clients (--client-config)
                "bootstrap.servers": bootstrap_servers,
                "socket.timeout.ms": int(timeout * 1000),
                "log_level": 0,  # connection noise during faults is expected; callers see errors
            }
        )

    def _brokers(self) -> list[tuple[str, int]]:
        result = []
        for server in self.bootstrap_servers.split(","):
            host, _, port = server.strip().rpartition(":")
            result.append((host, int(port)))
        return result

    # --- topics ------------------------------------------------------------
    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int = 3,
        config: dict[str, str] | None = None,
        exist_ok: bool = True,
    ) -> None:
        topic = NewTopic(
            name, num_partitions=partitions, replication_factor=replication_factor, config=dict(config or {})
        )
        future = self._client.create_topics([topic], operation_timeout=self.timeout)[name]
        try:
            future.result(timeout=self.timeout + 5)
        except KafkaException as error:
            kerr = error.args[0]
            if exist_ok and kerr.name() == "TOPIC_ALREADY_EXISTS":
                return
            raise GregorError(f"cannot create topic {name!r}: {kerr.str()}") from None

    def delete_topic(self, name: str) -> None:
        future = self._client.delete_topics([name], operation_timeout=self.timeout)[name]
        try:
            future.result(timeout=self.timeout + 5)
        except KafkaException as error:
            if error.args[0].name() != "UNKNOWN_TOPIC_OR_PART":
                raise GregorError(f"cannot delete topic {name!r}: {error.args[0].str()}") from None

    def topics(self, include_internal: bool = False) -> list[str]:
        metadata = self._client.list_topics(timeout=self.timeout)
        return sorted(t for t in metadata.topics if include_internal or not t.startswith("__"))

    def partitions(self, topic: str) -> dict[int, dict]:
        """{partition: {"leader": id or -1, "replicas": [...], "isr": [...]}}.

        A broker that has not yet seen a new topic answers "unknown topic";
        that is asked again for a few seconds before it counts as an error.
        """
        deadline = time.monotonic() + min(self.timeout, 5)
        while True:
            try:
                metadata = self._client.list_topics(topic, timeout=self.timeout)
            except KafkaException as error:
                raise GregorError(f"cannot read metadata for {topic!r}: {error.args[0].str()}") from None
            found = metadata.topics.get(topic)
            if found is not None and found.error is None:
                return {
                    pid: {"leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isrs)}
                    for pid, p in sorted(found.partitions.items())
                }
            reason = found.error.str() if found is not None and found.error else "no such topic"
            if time.monotonic() > deadline:
                raise GregorError(f"topic {topic!r}: {reason}")
            time.sleep(0.2)

    def leader(self, topic: str, partition: int) -> int:
        """Broker id leading the partition, or -1 while it has none."""
        return self.partitions(topic)[partition]["leader"]

    def isr(self, topic: str, partition: int) -> list[int]:
        return self.partitions(topic)[partition]["isr"]

    def brokers(self) -> dict[int, str]:
        metadata = self._client.list_topics(timeout=self.timeout)
        return {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}

    # --- roles -------------------------------------------------------------
    def _ask(self, what: str, call):
        """Tries every broker until one answers, retrying transient errors."""
        deadline = time.monotonic() + self.timeout
        last = "no broker answered"
        while True:
            for host, port in self._brokers():
                try:
                    return call(host, port)
                except kafka_wire.KafkaProtocolError as error:
                    if error.code not in _RETRIABLE_CODES:
                        raise
                    last = str(error)
                except (OSError, ConnectionError) as error:
                    last = f"{host}:{port}: {error}"
            if time.monotonic() > deadline:
                raise GregorError(f"cannot find the {what}: {last}")
            time.sleep(0.2)

    def controller(self) -> int:
        """Node id of the active KRaft controller (the metadata quorum leader)."""

        def ask(host: str, port: int) -> int:
            leader = kafka_wire.active_controller(host, port, timeout=self.timeout, security=self.client_config)
            if leader < 0:  # an election is running: ask again
                raise kafka_wire.KafkaProtocolError(15, "DescribeQuorum: no leader yet")
            return leader

        return self._ask("active controller", ask)

    def group_coordinator(self, group_id: str) -> int:
        return self._ask(
            f"coordinator of group {group_id!r}",
            lambda h, p: kafka_wire.find_coordinator(
                h, p, group_id, 0, timeout=self.timeout, security=self.client_config
            ),
        )

    def txn_coordinator(self, transactional_id: str) -> int:
        return self._ask(
            f"transaction coordinator of {transactional_id!r}",
            lambda h, p: kafka_wire.find_coordinator(
                h, p, transactional_id, 1, timeout=self.timeout, security=self.client_config
            ),
        )
