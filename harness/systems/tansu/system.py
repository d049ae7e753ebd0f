"""Tansu: a Kafka-compatible broker in Rust over pluggable storage.

With `--storage postgres` (the default) every node runs a broker and all of
them share one PostgreSQL on the controller host (postgres.py), so a broker
keeps no state of its own and any broker serves any partition. With
`--storage memory` the one broker keeps everything in its process (a
one-node lab; a kill loses it all). Tansu brokers never talk to each other
and each one calls itself node 111 and the leader of everything, so the
leader and coordinator roles name no single node (RoleUnavailable) and
there is no controller. The build (install.py), the database (postgres.py)
and the start line live here.
"""

from __future__ import annotations

import secrets
from types import SimpleNamespace

from ground.errors import GregorError
from ground.faults import NODE_FAULTS
from ground.protocols import RoleUnavailable, Service
from harness.systems import protocol_roles
from harness.systems.tansu import install, postgres

PORT = 9092
STORAGES = ("postgres", "memory")


class TansuRoles(protocol_roles.ProtocolRoles):
    def controller(self) -> str:
        raise RoleUnavailable("Tansu has no controller: its brokers share their state through the storage")


class TansuSystem:
    """One Tansu version; options: "storage" (postgres or memory)."""

    name = "tansu"
    # why evidence/segments.json has no batches of this system
    no_segment_dump = "Tansu keeps records in its storage engine (PostgreSQL or memory), not in Kafka segment files"
    OPTIONS = ("storage",)
    FAULT_LIMITS = "not every fault applies to its nodes"

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
            raise GregorError(f"the tansu system has no option {unknown[0]!r}")
        self.storage = options.get("storage") or "postgres"
        if self.storage not in STORAGES:
            raise GregorError(f"--storage {self.storage!r}: Tansu runs here on {' or '.join(STORAGES)}")
        if overrides:
            raise GregorError("Tansu takes no broker settings; drop --broker-config")
        self.version = install.check_version(version or install.DEFAULT_VERSION)
        self.overrides: dict[str, str] = {}
        self._state: dict = {}

    @property
    def options(self) -> dict:
        return {"storage": self.storage}

    @classmethod
    def node_faults(cls, backend_faults: frozenset, options: dict) -> frozenset:
        return frozenset(backend_faults) & frozenset(NODE_FAULTS)

    def node_names(self, brokers: int) -> list[str]:
        if self.storage == "memory" and brokers != 1:
            raise GregorError(
                f"Tansu's memory storage lives inside one broker: use --nodes 1, or --storage "
                f"postgres for {brokers} brokers"
            )
        return [f"n{i}" for i in range(1, brokers + 1)]

    def install(self, progress) -> None:
        install.install(self.version, progress=progress)

    def deploy(self, lab: str, nodes, progress, controller_address: str | None = None) -> None:
        found = install.installed(self.version)
        if found is None:
            raise GregorError(f"Tansu {self.version} is not built; run: gregor tansu install --version {self.version}")
        database = None
        if self.storage == "postgres":
            if not controller_address:
                raise GregorError("Tansu over PostgreSQL needs the controller host's address on the lab network")
            database = postgres.start(lab, controller_address, found.ddl, progress)
        binaries = {}
        for node in nodes:
            folder = node.provide(str(found.binary.parent))
            # argv[0] inside the node's home, so the lab's teardown finds the process by its path
            node.exec(["ln", "-sfn", f"{folder}/tansu", f"{node.home}/tansu"])
            binaries[node.name] = f"{node.home}/tansu"
        self._state = {
            "name": self.name,
            "version": self.version,
            "storage": self.storage,
            "cluster_id": f"gregor-{lab}-{secrets.token_hex(4)}",
            "database": database,
            "nodes": {node.name: node.address for node in nodes},
        }
        for node in nodes:
            node.service = self.service(node)

    def service(self, node) -> Service:
        url = f"tcp://{node.address}:{PORT}"
        argv = (
            f"{node.home}/tansu",
            "broker",
            "--cluster-id",
            self._state["cluster_id"],
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
        )
        storage = self._state["database"]["url"] if self._state.get("database") else "memory://tansu/"
        # The storage URL holds the database password: in the environment, not on the command line.
        env = (("STORAGE_ENGINE", storage), ("RUST_LOG", "warn"), ("NO_COLOR", "1"))
        return Service(
            argv=argv,
            log=f"{node.home}/tansu.log",
            pid_file=f"{node.home}/tansu.pid",
            marker=url,
            ports=(PORT,),
            env=env,
            cwd=node.home,
        )

    def state(self) -> dict:
        return dict(self._state)

    @classmethod
    def restore(cls, state: dict) -> "TansuSystem":
        system = cls.__new__(cls)
        system.version, system.storage, system.overrides = state["version"], state.get("storage", "postgres"), {}
        system._state = dict(state)
        return system

    def replication(self, nodes: int) -> int:
        return min(3, nodes)

    def bootstrap_servers(self, nodes) -> str:
        return ",".join(f"{n.address}:{PORT}" for n in nodes)

    def node_of(self, broker_id: int) -> str:
        """The node the brokers place `broker_id` on (RoleUnavailable when each broker
        names itself, as every Tansu broker calls itself 111)."""
        nodes = [SimpleNamespace(name=name, address=address) for name, address in self._state["nodes"].items()]
        return protocol_roles.node_by_address(nodes, PORT)(broker_id)

    def unhealthy(self, lab, topics: list[str]) -> list[str]:
        return protocol_roles.unhealthy(lab.nodes, PORT, topics)

    def roles(self, lab) -> TansuRoles:
        return TansuRoles(lab.admin(), self.node_of)

    @property
    def settings(self) -> dict[str, str]:
        return {}

    def describe(self) -> dict:
        storage = (
            f"PostgreSQL {postgres.bin_dir().parent.name} shared by every broker (on the controller host)"
            if self.storage == "postgres"
            else "memory of the one broker"
        )
        return {
            "system": self.name,
            "version": self.version,
            "storage": storage,
            "controllers": "none (the brokers share their state through the storage)",
        }

    def teardown(self, lab: str, state: dict | None, progress) -> None:
        """Stops the lab's PostgreSQL."""
        if postgres.stop(lab):
            progress(f"lab {lab}: PostgreSQL stopped")
