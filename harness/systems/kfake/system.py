"""franz-go's kfake: an in-process Kafka, every broker in one process on n1.

kfake does not replicate: `--nodes N` gives N brokers (ports 9092 up) in the
one process of the one node, so a node fault (pause, kill, netem) hits the
whole cluster at once and a partition can only cut clients off. Its state
goes to a data directory (kfake's DataDir, where the version has it), so a
killed process comes back with what it had written. Everything kfake-only
lives here: the build (build.py), our server (main.go), its start line.
"""

from __future__ import annotations

import secrets

from ground import faults
from ground.errors import GregorError
from ground.protocols import RoleUnavailable, Service
from harness.systems import protocol_roles, wire
from harness.systems.kfake import build

FIRST_PORT = 9092
# One node holds everything, so faults that cut nodes from each other do nothing.
NODE_FAULTS = frozenset(name for name in faults.NODE_FAULTS if not faults.kind(name).needs_peers)


class KfakeRoles(protocol_roles.ProtocolRoles):
    """Leaders and coordinators as kfake's brokers name them, plus the broker
    kfake's Metadata names as its controller (all of them live on n1)."""

    def __init__(self, admin, node_of, endpoints):
        super().__init__(admin, node_of)
        self.endpoints = endpoints

    def controller(self) -> str:
        for host, port in self.endpoints:
            try:
                return self._node(wire.cluster_metadata(host, port, [], timeout=3)["controller_id"], "controller")
            except (OSError, GregorError):
                continue
        raise RoleUnavailable("no kfake broker answers Metadata")


class KfakeSystem:
    """kfake at one module version (a pseudo-version, or `latest`)."""

    name = "kfake"
    # why evidence/segments.json has no batches of this system
    no_segment_dump = "kfake keeps every partition in the memory of one process: there are no segment files to dump"
    OPTIONS = ()
    FAULT_LIMITS = "all its brokers are one process on one node"

    def __init__(
        self,
        version: str | None = None,
        overrides: dict[str, str] | None = None,
        jvm_opts: list[str] | None = None,
        options: dict | None = None,
    ):
        if options:
            raise GregorError(f"the kfake system has no option {sorted(options)[0]!r}")
        self.version = version or "latest"
        self.overrides = {str(k): str(v) for k, v in (overrides or {}).items()}
        self.brokers = 3
        self.options: dict = {}
        self._state: dict = {}

    @classmethod
    def node_faults(cls, backend_faults: frozenset, options: dict) -> frozenset:
        return frozenset(backend_faults) & NODE_FAULTS

    def node_names(self, brokers: int) -> list[str]:
        self.brokers = brokers
        return ["n1"]

    def install(self, progress) -> None:
        self._build = build.build(self.version, progress)
        self.version = self._build.version

    def deploy(self, lab: str, nodes, progress, controller_address: str | None = None) -> None:
        found = build.installed(self.version)
        if found is None:
            raise GregorError(f"kfake {self.version} is not built; run: gregor kfake install --version {self.version}")
        if "BrokerConfigs" not in found.features and self.overrides:
            raise GregorError(f"kfake {self.version} takes no broker settings; drop --broker-config")
        node = nodes[0]
        folder = node.provide(str(found.binary.parent))
        self._state = {
            "name": self.name,
            "version": self.version,
            "franz_go": found.franz_go,
            "brokers": self.brokers,
            "overrides": self.overrides,
            "persistent": "DataDir" in found.features,
            "cluster_id": f"gregor-{lab}-{secrets.token_hex(4)}",
            "binary": f"{folder}/{build.BINARY}",
            "node": node.name,
        }
        progress(
            f"lab {lab}: kfake {self.version} (franz-go {found.franz_go}), {self.brokers} brokers in one "
            f"process on {node.name}"
        )
        node.service = self.service(node)

    def ports(self) -> list[int]:
        return [FIRST_PORT + i for i in range(int(self._state["brokers"]))]

    def service(self, node) -> Service:
        data = f"{node.home}/data"
        argv = [
            self._state["binary"],
            "--listen",
            node.address,
            "--ports",
            ",".join(map(str, self.ports())),
            "--cluster-id",
            self._state["cluster_id"],
        ]
        if self._state.get("persistent"):
            argv += ["--data-dir", data]
        for key, value in sorted(self._state.get("overrides", {}).items()):
            argv += ["--broker-config", f"{key}={value}"]
        return Service(
            argv=tuple(argv),
            log=f"{node.home}/kfake.log",
            pid_file=f"{node.home}/kfake.pid",
            marker=self._state["cluster_id"],
            ports=tuple(self.ports()),
        )

    def state(self) -> dict:
        return dict(self._state)

    @classmethod
    def restore(cls, state: dict) -> "KfakeSystem":
        system = cls(state["version"], state.get("overrides"))
        system.brokers = int(state["brokers"])
        system._state = dict(state)
        return system

    def replication(self, nodes: int) -> int:
        return min(3, int(self._state.get("brokers", self.brokers)))

    def _endpoints(self, nodes) -> list[tuple[str, int]]:
        node = next(n for n in nodes if n.name == self._state["node"])
        return [(node.address, port) for port in self.ports()]

    def bootstrap_servers(self, nodes) -> str:
        return ",".join(f"{host}:{port}" for host, port in self._endpoints(nodes))

    def node_of(self, broker_id: int) -> str:
        if 0 <= int(broker_id) < int(self._state["brokers"]):
            return self._state["node"]
        raise GregorError(f"this lab has no kfake broker {broker_id}")

    def unhealthy(self, lab, topics: list[str]) -> list[str]:
        endpoints = [(f"{self._state['node']}:{port}", host, port) for host, port in self._endpoints(lab.nodes)]
        return protocol_roles.unhealthy_at(endpoints, topics)

    def roles(self, lab) -> KfakeRoles:
        return KfakeRoles(lab.admin(), self.node_of, self._endpoints(lab.nodes))

    @property
    def settings(self) -> dict[str, str]:
        return dict(self._state.get("overrides", {}))

    def describe(self) -> dict:
        storage = (
            "in memory, persisted to a data directory (kfake DataDir)"
            if self._state.get("persistent")
            else "in memory only (this kfake has no DataDir: a kill loses everything)"
        )
        return {
            "system": self.name,
            "version": self.version,
            "storage": storage,
            "brokers": f"{self._state.get('brokers', self.brokers)} in one process (no replication)",
            "controllers": "inside the one process",
            "franz-go": self._state.get("franz_go"),
        }

    def teardown(self, lab: str, state: dict | None, progress) -> None:
        """Nothing runs beside the node."""
