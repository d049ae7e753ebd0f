"""A Kafka-compatible cluster someone else runs: only its bootstrap servers.

Gregor provisions nothing and changes nothing on it. Before a lab is up it
asks every bootstrap server (ApiVersions, Metadata) and refuses at once when
none answers; what it learned (cluster id, broker ids, APIs, features) goes
to test.json. Its clients still get places of their own on this host
(routed to the cluster), so client partitions and client pauses always
work. Node faults need the brokers' machines: with a backend that reaches
existing hosts (SSH) the nodes are those hosts; Gregor then cuts their
network and applies netem, but never pauses or kills a process it did not
start and cannot restart.
"""

from __future__ import annotations

from types import SimpleNamespace

from ground import faults
from ground.addresses import split_server
from ground.errors import GregorError
from ground.protocols import RoleUnavailable
from harness.systems import capabilities, protocol_roles

# What Gregor may do to the hosts of a cluster it does not run: never signal its processes.
HOST_FAULTS = frozenset(name for name in faults.NODE_FAULTS if not faults.kind(name).signals_process)


class ExternalRoles(protocol_roles.ProtocolRoles):
    """Leaders and coordinators as the brokers name them; the active KRaft
    controller where the brokers answer DescribeQuorum."""

    def controller(self) -> str:
        return self._node(self.admin.controller(), "active controller")


class ExternalSystem:
    """options: "bootstrap" (host:port,...), "hosts" (the backend gives the brokers' machines)."""

    name = "external"
    # why evidence/segments.json has no batches of this system
    no_segment_dump = (
        "the cluster is someone else's: Gregor has neither its log directories nor a Kafka install beside them"
    )
    OPTIONS = ("bootstrap", "hosts")
    FAULT_LIMITS = (
        "Gregor reaches no broker host without --backend ssh --hosts, and never signals a process it did not start"
    )

    def __init__(
        self,
        version: str | None = None,
        overrides: dict[str, str] | None = None,
        jvm_opts: list[str] | None = None,
        options: dict | None = None,
    ):
        options = dict(options or {})
        unknown = sorted(set(options) - set(self.OPTIONS))
        if unknown:
            raise GregorError(f"the external system has no option {unknown[0]!r}")
        bootstrap = str(options.get("bootstrap") or "").strip()
        if not bootstrap:
            raise GregorError(
                "the external system needs --bootstrap host:port,... (the bootstrap servers of the cluster to test)"
            )
        servers = [s.strip() for s in bootstrap.split(",") if s.strip()]
        for server in servers:
            split_server(server)
        if overrides:
            raise GregorError("Gregor does not configure an external cluster's brokers; drop --broker-config")
        self.bootstrap = ",".join(servers)
        self.hosts = bool(options.get("hosts"))
        self.version = version or "unknown"
        self.overrides: dict[str, str] = {}
        self.client_config: dict = {}
        self._state: dict = {}
        self._probe: dict | None = None

    @property
    def options(self) -> dict:
        return {"bootstrap": self.bootstrap, "hosts": self.hosts}

    @classmethod
    def node_faults(cls, backend_faults: frozenset, options: dict) -> frozenset:
        return frozenset(backend_faults) & HOST_FAULTS if options.get("hosts") else frozenset()

    def node_names(self, brokers: int) -> list[str]:
        return [f"n{i}" for i in range(1, brokers + 1)] if self.hosts else []

    def install(self, progress) -> None:
        """Nothing to install: asks the cluster, so that a wrong address fails now, in one line."""
        try:
            self._probe = capabilities.probe(self.bootstrap, timeout=5, client_config=self.client_config)
        except GregorError as error:
            raise GregorError(
                f"the external cluster does not answer at {self.bootstrap}: "
                f"{str(error).removeprefix('no bootstrap server answers ApiVersions: ')}"
            ) from None
        progress(
            f"external cluster {self._probe['cluster_id'] or '(no cluster id)'} at {self.bootstrap}: "
            f"brokers {', '.join(self._probe['brokers']) or 'none listed'}"
        )

    def deploy(self, lab: str, nodes, progress, controller_address: str | None = None) -> None:
        found = self._probe or capabilities.probe(self.bootstrap, client_config=self.client_config)
        hosts = sorted({address.rpartition(":")[0] for addresses in found["brokers"].values() for address in addresses})
        self._state = {
            "name": self.name,
            "version": self.version,
            "bootstrap": self.bootstrap,
            "hosts": self.hosts,
            "cluster_id": found["cluster_id"],
            "broker_ids": sorted(int(b) for b in found["brokers"]),
            "broker_hosts": hosts,
            "nodes": {n.name: n.address for n in nodes},
        }
        for node in nodes:
            node.service = self.service(node)

    def service(self, node):
        return None  # not a process of ours: never started, paused or killed by Gregor

    def state(self) -> dict:
        return dict(self._state)

    @classmethod
    def restore(cls, state: dict) -> "ExternalSystem":
        system = cls(state.get("version"), None, None, {"bootstrap": state["bootstrap"], "hosts": state.get("hosts")})
        system._state = dict(state)
        return system

    def replication(self, nodes: int) -> int:
        return max(1, min(3, len(self._state.get("broker_ids", [])) or nodes))

    def bootstrap_servers(self, nodes) -> str:
        return self.bootstrap

    def node_of(self, broker_id: int) -> str:
        """With the brokers' hosts, the node whose address a broker advertises."""
        if not self._state.get("nodes"):
            raise RoleUnavailable("Gregor reaches no machine of this external cluster (no --hosts)")
        nodes = [SimpleNamespace(name=n, address=a) for n, a in self._state["nodes"].items()]
        servers = [split_server(s) for s in self.bootstrap.split(",")]
        return protocol_roles.node_by_address(nodes, servers[0][1])(broker_id)

    def unhealthy(self, lab, topics: list[str]) -> list[str]:
        endpoints = [(server, *split_server(server)) for server in self.bootstrap.split(",")]
        return protocol_roles.unhealthy_at(endpoints, topics, security=lab.client_config)

    def roles(self, lab) -> ExternalRoles:
        return ExternalRoles(lab.admin(), self.node_of)

    @property
    def settings(self) -> dict[str, str]:
        return {}

    def describe(self) -> dict:
        return {
            "system": self.name,
            "version": self.version,
            "storage": "not known (a cluster Gregor did not start)",
            "controllers": "not known",
            "bootstrap": self.bootstrap,
            "cluster_id": self._state.get("cluster_id"),
        }

    def teardown(self, lab: str, state: dict | None, progress) -> None:
        """Nothing of ours runs beside the cluster."""
