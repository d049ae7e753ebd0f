"""The seams of the harness: Backend, Node and System.

A lab is one Backend (where nodes live: network namespaces, containers,
SSH hosts) composed with one System (what runs on them: Apache Kafka,
Tansu, kfake, ...). Nothing above the harness (nemesis, workloads, checkers)
asks which backend or system it runs on: it gets `Node` objects that all
answer the same calls, and a `Roles` object that names nodes by what they do.

Like Jepsen's Remote/DB/Net and ducktape's RemoteAccount/Service, each
protocol is a handful of methods; a new backend or system is one module
that implements them (docs/BACKENDS.md).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Iterable, Literal, Protocol, Sequence, runtime_checkable

from ground import namespaces

Progress = Callable[[str], None]
NodeState = Literal["running", "paused", "dead"]


class RoleUnavailable(Exception):
    """The system has no such role right now (an election is running), or
    never has it (a system without a controller). Never guessed."""


@dataclass(frozen=True)
class Service:
    """One long-running process of the system on a node.

    The System says what to run; the Node runs it, finds it again later
    (`pid_file`, checked against `marker`, a string its command line holds,
    so a recycled pid is never signalled) and signals it.
    """

    argv: tuple[str, ...]
    log: str  # path on the node; stdout and stderr go there
    pid_file: str  # path on the node
    marker: str  # a string the process's command line holds
    ports: tuple[int, ...] = ()  # what it listens on: start refuses if taken, stop waits until free;
    # the first is where clients connect and followers fetch
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None

    def to_json(self) -> dict:
        return {
            "argv": list(self.argv),
            "log": self.log,
            "pid_file": self.pid_file,
            "marker": self.marker,
            "ports": list(self.ports),
            "env": [list(pair) for pair in self.env],
            "cwd": self.cwd,
        }

    @classmethod
    def from_json(cls, data: dict) -> "Service":
        return cls(
            argv=tuple(data["argv"]),
            log=data["log"],
            pid_file=data["pid_file"],
            marker=data["marker"],
            ports=tuple(data.get("ports", ())),
            env=tuple(tuple(pair) for pair in data.get("env", ())),
            cwd=data.get("cwd"),
        )


@runtime_checkable
class Node(Protocol):
    """One machine of the cluster, the same calls on every backend.

    Faults go through `exec` with the same tools everywhere (iptables,
    tc or the NFQUEUE emulation, signals); `harness.node.ExecNode` implements
    all of it on top of exec/spawn/upload/download.
    """

    name: str
    address: str  # what the controller and the clients connect to
    home: str  # a directory of ours on the node
    service: Service | None  # the system's process, set by System.deploy

    def exec(
        self, argv: Sequence[str], *, check: bool = True, timeout: float = 30, stdin: str | None = None
    ) -> subprocess.CompletedProcess: ...
    def spawn(
        self, argv: Sequence[str], *, log: str, pid_file: str, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> int: ...
    def upload(self, local: str, remote: str) -> None: ...
    def download(self, remote: str, local: str) -> None: ...
    def provide(self, local_dir: str) -> str: ...

    def start(self) -> int: ...
    def stop(self, timeout: float = 30) -> None: ...
    def kill(self) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def pid(self) -> int | None: ...
    def state(self) -> NodeState: ...

    def drop_from(self, addresses: Iterable[str], port: int | None = None) -> None: ...
    def drop_to(self, addresses: Iterable[str]) -> None: ...
    def heal_network(self) -> None: ...
    def netem(self, spec: str) -> str: ...
    def clear_netem(self) -> None: ...


@dataclass(frozen=True)
class ClientPlace:
    """Where a client process runs: a network namespace of its own on the
    controller host, reachable from the nodes, so that it can be cut off.

    `handle` is what a client process needs to enter it (picklable); only
    `enter` reads it.
    """

    name: str
    address: str
    handle: dict = field(default_factory=dict)

    def enter(self) -> None:
        """Moves the calling process (a client about to start) into this place."""
        namespaces.enter(self.handle["netns"])


class Roles(Protocol):
    """Who does what right now, asked of the cluster (never guessed).

    Each call returns a node name, or raises RoleUnavailable.
    """

    def leader(self, topic: str, partition: int) -> str: ...
    def controller(self) -> str: ...
    def txn_coordinator(self, transactional_id: str) -> str: ...
    def group_coordinator(self, group: str) -> str: ...


@runtime_checkable
class Backend(Protocol):
    """Where nodes live. One instance per lab; its state goes in the lab's
    state file, so `attach` and `down` work from another process."""

    name: ClassVar[str]
    # What it can perform on its nodes: of ground/faults.py's NODE_FAULTS, plus POWER_LOSS where its
    # nodes can serve their data from powerfs (harness/powerfs.py: FUSE and mfusepy on the node).
    faults: ClassVar[frozenset[str]]

    def check(self) -> None:
        """Prerequisites (root, a Docker engine, reachable hosts): GregorError, one line."""

    def provision(self, lab: str, names: list[str], progress: Progress) -> dict:
        """Creates the nodes; returns this backend's part of the state file."""

    def nodes(self, lab: str, state: dict) -> list[Node]:
        """The Node objects of a provisioned lab, from its state."""

    def client_place(self, lab: str, state: dict, name: str) -> ClientPlace:
        """A place of its own for one client (created on first use); may
        update `state` (the caller saves it)."""

    def remove_client_place(self, lab: str, state: dict, name: str) -> None: ...

    def place_node(self, lab: str, place: ClientPlace) -> Node:
        """The client place as a Node without a service (its network primitives
        cut it off from the cluster)."""

    def controller_address(self, lab: str, state: dict) -> str:
        """The address at which the nodes reach the controller host."""

    def collect(self, lab: str, state: dict, node: Node, local_dir: str) -> None:
        """Copies the node's logs and configs into local_dir (the run's nodes/<node>/)."""

    def stale(self, lab: str, state: dict, local_only: bool = False) -> str | None:
        """Why the lab's machines are no longer there, in words; None while
        they all are. Asked before a lab is reused or taken down, before
        anything else reaches its nodes: local evidence first, which sends
        no packet (namespaces, containers, `vagrant status`, routes); then,
        unless `local_only`, one handshake with each machine reached over
        the network (SSH: the recorded endpoint and host key). Never a
        packet to a broker port. May add to `state` what it learned (the
        caller saves it)."""

    def teardown(self, lab: str, state: dict | None, progress: Progress, machines_gone: bool = False) -> list[str]:
        """Removes every trace of the lab, also after a crash (state None:
        found by name); returns what was removed, in words. machines_gone:
        `stale` found them gone, so only what is on this host is removed
        and nothing is sent to them."""

    def leftovers(self, lab: str) -> list[str]:
        """What of a lab of this name still exists (empty once down)."""

    def busy(self, lab: str) -> bool:
        """Whether anything of a lab of this name exists (up, or left by a crash)."""

    def can_look_without_starting(self) -> bool:
        """Whether `teardown` by name can run without starting anything (a daemon)."""


@runtime_checkable
class System(Protocol):
    """What runs on the nodes: one Kafka-compatible system at one version.

    Built as System(version, overrides, jvm_opts, options) for a new lab, or
    with System.restore(state) for a running one.
    """

    name: ClassVar[str]
    version: str
    OPTIONS: ClassVar[tuple[str, ...]]  # the system options it takes (--bootstrap, --controllers, ...)
    FAULT_LIMITS: ClassVar[str]  # one line: why some faults do not reach its nodes (for refusals)
    client_config: dict  # every client's settings (--client-config), set before install

    @classmethod
    def node_faults(cls, backend_faults: frozenset[str], options: dict) -> frozenset[str]:
        """Which of the backend's faults act on this system's nodes (the rest
        can only hit clients, or nothing): kfake's one node cannot be cut
        from peers, an external cluster's brokers are not ours to pause."""

    def node_names(self, brokers: int) -> list[str]:
        """The nodes `brokers` brokers take: n1..nN, plus dedicated
        controllers, or one node for an in-process cluster, or none."""

    def install(self, progress: Progress) -> None:
        """Fetches or builds the system on the controller (cached per version)."""

    def deploy(self, lab: str, nodes: list[Node], progress: Progress, controller_address: str | None = None) -> None:
        """Puts the system on the nodes (files, configs, storage) and sets each
        node's `service`; afterwards `state()` holds all a later process needs.
        `controller_address`: where the nodes reach the controller host, for
        what runs beside them (Tansu's PostgreSQL)."""

    def state(self) -> dict:
        """This system's part of the lab's state file (has "name" and "version")."""

    def service(self, node: Node) -> Service | None:
        """The process that is this system on `node` (None: not a process of ours)."""

    def replication(self, nodes: int) -> int:
        """The replication factor a topic gets by default on `nodes` nodes."""

    def bootstrap_servers(self, nodes: list[Node]) -> str: ...

    def node_of(self, broker_id: int) -> str:
        """The node a broker id names (GregorError if none)."""

    @property
    def settings(self) -> dict[str, str]:
        """The broker settings in force, for test.json."""

    def unhealthy(self, lab, topics: list[str]) -> list[str]:
        """What keeps these topics from being healthy; [] when healthy."""

    def roles(self, lab) -> Roles: ...

    def describe(self) -> dict:
        """What test.json and the report say about it: system, version, storage, ..."""

    def teardown(self, lab: str, state: dict | None, progress: Progress) -> None:
        """Stops what the system runs beside the nodes (a shared database, say)."""
