"""Apache Kafka in KRaft mode: combined broker+controller nodes n1..nN, or
brokers n1..nN beside dedicated controllers k1..kM (--controllers M), the
topology most production clusters run.

Everything Kafka-specific lives under harness/systems/kafka/: the jars from
Maven Central (install.py), server.properties (config.py), the storage
format step (where the transaction.version feature is set), the
`kafka.Kafka` start line, its ports, and the active controller (the Raft
leader of __cluster_metadata).
"""

from __future__ import annotations

import base64
import threading
import uuid

from ground.errors import GregorError
from ground.faults import NODE_FAULTS, POWER_LOSS, WIRE
from ground.protocols import Service
from harness.systems import protocol_roles
from harness.systems.kafka import config, install, segments, txn_log


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
        raise GregorError(
            f"{node.label}: java not found; install a JDK 17+ there (Debian: apt-get install openjdk-17-jre-headless)"
        )


class KafkaRoles(protocol_roles.ProtocolRoles):
    """Kafka's roles, plus the active KRaft controller."""

    def controller(self) -> str:
        return self._node(self.admin.controller(), "active controller")


class KafkaSystem:
    """One Apache Kafka version on the lab's nodes.

    options: "controllers" (dedicated KRaft controllers; 0 = every node is
    both), "transaction_version" (the transaction.version feature the
    cluster is formatted with; None = the version's own default).
    """

    name = "kafka"
    port = config.BROKER_PORT
    OPTIONS = ("controllers", "transaction_version")
    FAULT_LIMITS = "not every fault applies to its nodes"

    def __init__(
        self,
        version: str | None = None,
        overrides: dict[str, str] | None = None,
        jvm_opts: list[str] | None = None,
        options: dict | None = None,
    ):
        self.version = install.check_version(version or install.DEFAULT_VERSION)
        self.overrides = {str(k): str(v) for k, v in (overrides or {}).items()}
        self.jvm_opts = list(jvm_opts or config.DEFAULT_JVM_OPTS)
        self.options = check_options(options or {})
        self._state: dict = {}

    @classmethod
    def node_faults(cls, backend_faults: frozenset, options: dict) -> frozenset:
        """Every fault the backend can do: Kafka runs on every node (and says
        where its data lives, so power loss too; and which listener its brokers
        use to each other, so wire faults on their own traffic too)."""
        return frozenset(backend_faults) & (frozenset(NODE_FAULTS) | {POWER_LOSS, WIRE})

    def node_names(self, brokers: int) -> list[str]:
        """Brokers n1..nN, then the dedicated controllers k1..kM."""
        controllers = int(self.options.get("controllers") or 0)
        return [f"n{i}" for i in range(1, brokers + 1)] + [f"k{i}" for i in range(1, controllers + 1)]

    # --- the protocol ---------------------------------------------------------------
    def install(self, progress) -> None:
        kafka = install.installed(self.version) or install.install(self.version, progress=progress)
        install.ensure_tools(kafka, progress)  # DumpLogSegments, for the transaction log (txn_log.py)

    def replication(self, nodes: int) -> int:
        brokers = len(self.broker_nodes_names()) if self._state else nodes
        return min(3, brokers)

    def deploy(self, lab: str, nodes, progress, controller_address: str | None = None) -> None:
        kafka = install.require_installed(self.version)
        for node in nodes:
            require_java(node)
        node_ids = {node.name: i for i, node in enumerate(nodes, 1)}
        node_roles = {
            node.name: ("controller" if node.name.startswith("k") else "broker")
            if self.options.get("controllers")
            else "broker,controller"
            for node in nodes
        }
        voters = ",".join(
            f"{node_ids[n.name]}@{n.address}:{config.CONTROLLER_PORT}"
            for n in nodes
            if "controller" in node_roles[n.name]
        )
        brokers = sum(1 for role in node_roles.values() if "broker" in role)
        cluster_id = new_cluster_id()
        homes = {}
        for node in nodes:
            homes[node.name] = node.provide(str(kafka.home))
            props = config.node_properties(
                node_ids[node.name],
                node.address,
                voters,
                self.data_dir(node),
                brokers,
                self.overrides,
                role=node_roles[node.name],
            )
            node.write_text(f"{node.home}/server.properties", config.render(props))
        self._state = {
            "name": self.name,
            "version": self.version,
            "cluster_id": cluster_id,
            "overrides": self.overrides,
            "jvm_opts": self.jvm_opts,
            "options": self.options,
            "settings": {**config.default_settings(brokers), **self.overrides},
            "nodes": {
                n.name: {"broker_id": node_ids[n.name], "kafka_home": homes[n.name], "roles": node_roles[n.name]}
                for n in nodes
            },
        }
        features = self._features()
        progress(
            f"lab {lab}: formatting storage (cluster id {cluster_id}{', ' + ', '.join(features) if features else ''})"
        )
        self._format_storage(nodes, features)
        for node in nodes:
            node.service = self.service(node)

    def _features(self) -> list[str]:
        level = self.options.get("transaction_version")
        return [] if level is None else [f"transaction.version={level}"]

    def data_dir(self, node) -> str:
        """Where the node's durable state lives (log.dirs; KRaft's metadata log too):
        what a power cut hits when the lab's storage is powerfs."""
        return f"{node.home}/data"

    def _format_storage(self, nodes, features: list[str]) -> None:
        """kafka.tools.StorageTool on every node at once (one short JVM each)."""
        errors: dict[str, str] = {}

        def format_one(node) -> None:
            home = self._state["nodes"][node.name]["kafka_home"]
            result = node.exec(
                [
                    "java",
                    "-Xmx128m",
                    "-XX:+UseSerialGC",
                    "-XX:TieredStopAtLevel=1",
                    self._log4j_flag(home),
                    "-cp",
                    f"{home}/libs/*",
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    self._state["cluster_id"],
                    "-c",
                    f"{node.home}/server.properties",
                    *[arg for feature in features for arg in ("--feature", feature)],
                ],
                check=False,
                timeout=120,
            )
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
        roles = self._state["nodes"][node.name].get("roles", "broker,controller")
        ports = tuple(
            port
            for port, role in ((config.BROKER_PORT, "broker"), (config.CONTROLLER_PORT, "controller"))
            if role in roles
        )
        return Service(
            argv=argv,
            log=f"{node.home}/broker.log",
            pid_file=f"{node.home}/broker.pid",
            marker=config_path,
            ports=ports,
        )

    def state(self) -> dict:
        return dict(self._state)

    @classmethod
    def restore(cls, state: dict) -> "KafkaSystem":
        system = cls(state["version"], state.get("overrides"), state.get("jvm_opts"), state.get("options"))
        system._state = dict(state)
        return system

    def broker_nodes_names(self) -> list[str]:
        return [
            name for name, info in self._state["nodes"].items() if "broker" in info.get("roles", "broker,controller")
        ]

    def _brokers(self, nodes) -> list:
        names = set(self.broker_nodes_names())
        return [n for n in nodes if n.name in names]

    def bootstrap_servers(self, nodes) -> str:
        return ",".join(f"{n.address}:{config.BROKER_PORT}" for n in self._brokers(nodes))

    def inter_broker_servers(self, nodes) -> list[str]:
        """Where the brokers connect to each other (inter.broker.listener.name PLAINTEXT, the
        listener the clients use too): what a wire relay on the nodes redirects."""
        return [f"{n.address}:{config.BROKER_PORT}" for n in self._brokers(nodes)]

    def inter_broker_nodes(self, nodes) -> list:
        """The nodes whose process sends broker-to-broker requests (dedicated controllers do not)."""
        return self._brokers(nodes)

    def broker_id(self, node_name: str) -> int:
        return self._state["nodes"][node_name]["broker_id"]

    def node_of(self, broker_id: int) -> str:
        for name, info in self._state["nodes"].items():
            if info["broker_id"] == broker_id:
                return name
        raise GregorError(f"this lab has no broker {broker_id}")

    def unhealthy(self, lab, topics: list[str]) -> list[str]:
        return protocol_roles.unhealthy(self._brokers(lab.nodes), config.BROKER_PORT, topics)

    def roles(self, lab) -> KafkaRoles:
        return KafkaRoles(lab.admin(), self.node_of)

    @property
    def settings(self) -> dict[str, str]:
        """The broker settings in force (defaults, then the user's overrides)."""
        return dict(self._state.get("settings", {}))

    def describe(self) -> dict:
        controllers = int(self.options.get("controllers") or 0)
        return {
            "system": self.name,
            "version": self.version,
            "storage": "local log directories (KRaft)",
            "controllers": (
                f"{controllers} dedicated (k1..k{controllers})" if controllers else "combined with brokers"
            ),
        }

    def transaction_log(self, lab, prefix: str) -> dict:
        """The transaction protocol each transactional id starting with `prefix` used, as the
        brokers' transaction log records it (txn_log.py; test.json "transaction_protocol")."""
        return txn_log.read(self, lab, prefix)

    def segment_dump(self, lab, wanted: dict[tuple[str, int], list[int]]) -> dict:
        """Per broker node, its replicas of the wanted (topic, partition)s as their segment
        files hold them, near the named offsets (segments.py; evidence/segments.json)."""
        return {"source": segments.SOURCE, "window": segments.WINDOW, "nodes": segments.collect(self, lab, wanted)}

    def teardown(self, lab: str, state: dict | None, progress) -> None:
        """Nothing runs beside the nodes."""


def check_options(options: dict) -> dict:
    """The Kafka options, checked: one line for a bad value."""
    unknown = sorted(set(options) - set(KafkaSystem.OPTIONS))
    if unknown:
        raise GregorError(f"the kafka system has no option {unknown[0]!r}")
    controllers = _whole(options.get("controllers") or 0, "--controllers")
    if not 0 <= controllers <= 5:
        raise GregorError(f"--controllers must be 0 (combined nodes) to 5, got {controllers}")
    level = options.get("transaction_version")
    if level is not None:
        level = _whole(level, "--transaction-version")
        if level not in (0, 1, 2):
            raise GregorError(f"--transaction-version must be 0, 1 or 2, got {level}")
    return {"controllers": controllers, "transaction_version": level}


def _whole(value, flag: str) -> int:
    try:
        return int(str(value))
    except ValueError:
        raise GregorError(f"{flag} must be a whole number, got {value!r}") from None
