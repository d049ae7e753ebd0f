"""Apache Kafka in KRaft mode: every node a combined broker and controller.

Everything Kafka-specific lives under harness/systems/kafka/: the jars from
Maven Central (install.py), server.properties (config.py), the storage
format step, the `kafka.Kafka` start line, its ports, and the active
controller (the Raft leader of __cluster_metadata).
"""

from __future__ import annotations

import base64
import threading
import uuid

from harness.errors import GregorError
from harness.protocols import Service
from harness.systems import protocol
from harness.systems.admin import KafkaAdmin
from harness.systems.kafka import config, install


def new_cluster_id() -> str:
    """A Kafka-style base64 UUID; never one starting with '-', which the
    storage tool would read as an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def require_java(node) -> None:
    """Kafka needs a JVM on every node: one line naming the node if it has none."""
    found = node.exec(["sh", "-c", "command -v java"], check=False)
    if found.returncode != 0 or not found.stdout.strip():
        raise GregorError(f"{node.name}: java not found; install a JDK 17+ there "
                          "(Debian: apt-get install openjdk-17-jre-headless)")


class KafkaRoles(protocol.ProtocolRoles):
    """Kafka's roles, plus the active KRaft controller."""

    def controller(self) -> str:
        return self._node(self.admin.controller(), "active controller")


class KafkaSystem:
    """One Apache Kafka version on the lab's nodes."""

    name = "kafka"
    port = config.BROKER_PORT

    def __init__(self, version: str | None = None, overrides: dict[str, str] | None = None,
                 jvm_opts: list[str] | None = None):
        self.version = install.check_version(version or install.DEFAULT_VERSION)
        self.overrides = {str(k): str(v) for k, v in (overrides or {}).items()}
        self.jvm_opts = list(jvm_opts or config.DEFAULT_JVM_OPTS)
        self._state: dict = {}

    # --- the protocol ---------------------------------------------------------------
    def install(self, progress) -> None:
        install.installed(self.version) or install.install(self.version, progress=progress)

    def replication(self, nodes: int) -> int:
        return min(3, nodes)

    def deploy(self, lab: str, nodes, progress) -> None:
        kafka = install.require_installed(self.version)
        for node in nodes:
            require_java(node)
        broker_ids = {node.name: i for i, node in enumerate(nodes, 1)}
        voters = ",".join(f"{broker_ids[n.name]}@{n.address}:{config.CONTROLLER_PORT}" for n in nodes)
        cluster_id = new_cluster_id()
        homes = {}
        for node in nodes:
            homes[node.name] = node.provide(str(kafka.home))
            props = config.node_properties(broker_ids[node.name], node.address, voters, self.data_dir(node),
                                           len(nodes), self.overrides)
            node.write_text(f"{node.home}/server.properties", config.render(props))
        self._state = {"name": self.name, "version": self.version, "cluster_id": cluster_id,
                       "overrides": self.overrides, "jvm_opts": self.jvm_opts,
                       "settings": {**config.default_settings(len(nodes)), **self.overrides},
                       "nodes": {n.name: {"broker_id": broker_ids[n.name], "kafka_home": homes[n.name]}
                                 for n in nodes}}
        progress(f"lab {lab}: formatting storage (cluster id {cluster_id})")
        self._format_storage(nodes)
        for node in nodes:
            node.service = self.service(node)

    def data_dir(self, node) -> str:
        """Where the node's durable state lives (log.dirs; KRaft's metadata log too):
        what a power cut hits when the lab's storage is powerfs."""
        return f"{node.home}/data"

    def _format_storage(self, nodes) -> None:
        """kafka.tools.StorageTool on every node at once (one short JVM each)."""
        errors: dict[str, str] = {}

        def format_one(node) -> None:
            home = self._state["nodes"][node.name]["kafka_home"]
            result = node.exec(["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                                self._log4j_flag(home), "-cp", f"{home}/libs/*", "kafka.tools.StorageTool",
                                "format", "-t", self._state["cluster_id"], "-c", f"{node.home}/server.properties"],
                               check=False, timeout=120)
            if result.returncode != 0:
                errors[node.name] = ((result.stdout + result.stderr).strip().splitlines() or ["no output"])[-1]

        threads = [threading.Thread(target=format_one, args=(node,)) for node in nodes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            name = sorted(errors)[0]
            raise GregorError(f"{name}: formatting storage failed: {errors[name]}")

    def _log4j_flag(self, home: str) -> str:
        if install.is_4x(self.version):
            return f"-Dlog4j2.configurationFile={home}/log4j2.properties"
        return f"-Dlog4j.configuration=file:{home}/log4j.properties"

    def service(self, node) -> Service:
        home = self._state["nodes"][node.name]["kafka_home"]
        config_path = f"{node.home}/server.properties"
        argv = ("java", *self.jvm_opts, self._log4j_flag(home), "-cp", f"{home}/libs/*", "kafka.Kafka", config_path)
        return Service(argv=argv, log=f"{node.home}/broker.log", pid_file=f"{node.home}/broker.pid",
                       marker=config_path, ports=(config.BROKER_PORT, config.CONTROLLER_PORT))

    def state(self) -> dict:
        return dict(self._state)

    @classmethod
    def restore(cls, state: dict) -> "KafkaSystem":
        system = cls(state["version"], state.get("overrides"), state.get("jvm_opts"))
        system._state = dict(state)
        return system

    def bootstrap_servers(self, nodes) -> str:
        return ",".join(f"{n.address}:{config.BROKER_PORT}" for n in nodes)

    def broker_id(self, node_name: str) -> int:
        return self._state["nodes"][node_name]["broker_id"]

    def node_of(self, broker_id: int) -> str:
        for name, info in self._state["nodes"].items():
            if info["broker_id"] == broker_id:
                return name
        raise GregorError(f"this lab has no broker {broker_id}")

    def unhealthy(self, lab, topics: list[str]) -> list[str]:
        return protocol.unhealthy(lab.nodes, config.BROKER_PORT, topics)

    def roles(self, lab) -> KafkaRoles:
        return KafkaRoles(KafkaAdmin(lab.bootstrap_servers), self.node_of)

    @property
    def settings(self) -> dict[str, str]:
        """The broker settings in force (defaults, then the user's overrides)."""
        return dict(self._state.get("settings", {}))

    def describe(self) -> dict:
        return {"system": self.name, "version": self.version, "storage": "local log directories (KRaft)",
                "controllers": "combined with brokers"}

    def teardown(self, lab: str, state: dict | None, progress) -> None:
        """Nothing runs beside the nodes."""
