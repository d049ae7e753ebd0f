"""A lab: one backend's nodes running one system, remembered in a state file.

    lab = Lab.up(nodes=3, backend="local", system="kafka", version="3.9.1")
    lab = Lab.attach("gregor")          # from another process
    Lab.down("gregor")                  # idempotent; also after a crash

`Lab.up` writes the state file before it creates anything and tears down
whatever it made if it fails or is interrupted; only a kill it cannot catch
leaves a lab half up, and then its state file says so (`unfinished`).
`Lab.attach` refuses a stale lab, one whose machines are gone while its
state file stayed (Backend.stale), or whose `up` was killed before it
finished, before anything reaches its addresses;
`Lab.down` then removes only what is left on this host. `Lab.down` also
works from names alone when the state file is gone. The
nemesis, the workloads and the controller see only this class, `Node`s and
`Roles`: never which backend or system is behind them.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable

from ground.atomic import write_json
from ground.errors import GregorError
from ground.faults import WIRE
from ground.paths import failed_dir, state_dir
from ground.protocols import ClientPlace
from harness import registry, wire_nodes, wire_relay
from harness.backends import netns
from harness.wire.places import default_control

HEALTH_TOPIC = "gregor-health"
MAX_NODES = 15
# "disk": the system's data on the node's own file system; "powerfs": served by
# harness/powerfs.py, so that a power cut (nemesis power-loss) loses what was never fsynced.
STORAGES = ("disk", "powerfs")


def lab_name(name: str | None, backend: str = "local") -> str:
    """The lab's name: given, else $GREGOR_LAB, else the backend's default."""
    return netns.check_lab_name(name or os.environ.get("GREGOR_LAB") or registry.default_lab_name(backend))


def state_path(name: str) -> Path:
    return state_dir() / f"{name}.json"


def read_state(name: str) -> dict | None:
    try:
        return json.loads(state_path(name).read_text())
    except (FileNotFoundError, ValueError):
        return None


class StaleLab(GregorError):
    """A lab whose state file outlived its machines: never reused, nothing sent to it."""

    def __init__(self, name: str, backend: str, why: str):
        self.name, self.backend, self.why = name, backend, why
        super().__init__(
            f"lab {name!r} is stale, so it is not reused and nothing was sent to its brokers: {why}; "
            f"run: {down_command(name, backend)}"
        )


UNFINISHED = "its setup never finished (the process that brought it up was killed, or is still at it)"


def unfinished(state: dict) -> bool:
    """A state file `Lab.up` wrote but never completed (it sets up_seconds once the lab is
    healthy): its nodes may be half deployed, so nothing may treat it as a running lab."""
    return "up_seconds" in state and state["up_seconds"] is None


def down_command(name: str, backend: str) -> str:
    """The command that takes lab `name` down (its state file names its hosts)."""
    return f"gregor lab down --lab {name}" + (f" --backend {backend}" if backend != "local" else "")


class Lab:
    """A running lab; build one with `Lab.up` or `Lab.attach`."""

    def __init__(self, state: dict, client_config: dict | None = None):
        self._state = state
        # Settings every client of this lab gets (--client-config: security,
        # credentials); kept in memory only, never in the state file or a run's files.
        self.client_config = dict(client_config or {})
        self.name: str = state["name"]
        self.backend = registry.backend(state["backend"]["name"], **state["backend"].get("options", {}))
        self.system = registry.restore_system(state["system"])
        self.up_seconds: float | None = state.get("up_seconds")
        self.nodes = self.backend.nodes(self.name, state["backend"])
        for node in self.nodes:
            node.service = self.system.service(node)

    # --- lookups ------------------------------------------------------------------------
    @property
    def version(self) -> str:
        return self.system.version

    @property
    def brokers(self) -> int:
        """How many brokers the lab was brought up with (its nodes may differ)."""
        return int(self._state.get("brokers") or len(self.nodes))

    @property
    def broker_config(self) -> dict[str, str]:
        return self.system.settings

    @property
    def backend_options(self) -> dict:
        """What the backend was given (the SSH backend: its hosts and key file)."""
        return dict(self._state["backend"].get("options", {}))

    def node(self, name: str):
        for node in self.nodes:
            if node.name == name:
                return node
        raise GregorError(f"lab {self.name} has no node {name!r}; nodes: {', '.join(n.name for n in self.nodes)}")

    def node_for_broker(self, broker_id: int):
        return self.node(self.system.node_of(int(broker_id)))

    @property
    def bootstrap_servers(self) -> str:
        return self.system.bootstrap_servers(self.nodes)

    def admin(self, timeout: float = 10):
        from harness.systems.admin import KafkaAdmin

        return KafkaAdmin(self.bootstrap_servers, timeout=timeout, client_config=self.client_config)

    def node_faults(self) -> frozenset[str]:
        """The faults this lab's system takes on its nodes (the rest only hit clients)."""
        return type(self.system).node_faults(self.backend.faults, self._state["system"])

    def client_addresses(self) -> list[str]:
        """Where the clients' packets go: every broker's address (the bootstrap
        servers, and what the brokers advertised when the lab came up), so that
        a client cut works also for a cluster with no node of ours."""
        import socket

        hosts = [server.rpartition(":")[0].strip("[]") for server in self.bootstrap_servers.split(",")]
        hosts += self._state["system"].get("broker_hosts", [])
        found: list[str] = []
        for host in hosts:
            try:
                address = socket.gethostbyname(host)
            except OSError:
                address = host
            if address not in found:
                found.append(address)
        return found

    def cluster_info(self, timeout: float = 5) -> dict:
        """What the brokers say they are and serve (ApiVersions, cluster id,
        broker ids), asked now: harness/systems/capabilities.py."""
        from harness.systems.capabilities import probe

        return probe(self.bootstrap_servers, timeout=timeout, client_config=self.client_config)

    def roles(self):
        """Who leads and coordinates what, asked of the cluster at each call."""
        return self.system.roles(self)

    def describe(self) -> dict:
        """Backend and system, for test.json and the report's setup (a backend
        may add what a reader must know, e.g. the SSH backend's hosts and how
        their keys were checked)."""
        extra = getattr(self.backend, "describe", None)
        found = {
            "backend": self.backend.name,
            **(extra(self._state["backend"]) if extra else {}),
            **self.system.describe(),
        }
        if self.storage == "powerfs":
            found["power"] = "data on powerfs: a power cut loses what was never fsynced"
        return found

    # --- storage --------------------------------------------------------------------------
    @property
    def storage(self) -> str:
        return self._state.get("storage", "disk")

    def data_dir(self, node) -> str:
        """The directory of the node's durable state, as the system says."""
        where = getattr(self.system, "data_dir", None)
        if where is None:
            raise GregorError(
                f"the {self.system.name} system does not say where its data lives, so its nodes cannot lose power"
            )
        return where(node)

    def start_node(self, name: str) -> None:
        """Starts the system on a dead node, its storage served first (after a
        power cut its powerfs mount is gone)."""
        node = self.node(name)
        if self.storage == "powerfs":
            node.mount_powerfs(self.data_dir(node))
        node.start()

    # --- lifecycle ------------------------------------------------------------------------
    @classmethod
    def up(
        cls,
        nodes: int = 3,
        version: str | None = None,
        broker_overrides: dict | None = None,
        name: str | None = None,
        progress: Callable[[str], None] | None = print,
        jvm_opts: list[str] | None = None,
        timeout: float = 120,
        backend: str = "local",
        system: str = "kafka",
        backend_options: dict | None = None,
        system_options: dict | None = None,
        client_config: dict | None = None,
        storage: str = "disk",
    ) -> "Lab":
        """Provisions the nodes, deploys the system, starts it, waits until healthy.

        `nodes` counts brokers; the system says which nodes that takes
        (dedicated controllers add some, kfake runs all its brokers on one,
        an external cluster needs none of ours). storage "powerfs" serves each
        node's data directory from powerfs, so the power-loss fault can take
        what was never fsynced (backends that list it)."""
        started = time.monotonic()
        progress = progress or (lambda _message: None)
        name = lab_name(name, backend)
        if not isinstance(nodes, int) or nodes < 1:
            raise GregorError(f"node count must be at least 1, got {nodes}")
        if nodes > MAX_NODES:
            raise GregorError(f"node count must be at most {MAX_NODES}, got {nodes}")
        chosen = registry.backend(backend, **(backend_options or {}))
        the_system = registry.system_class(system)(version, broker_overrides, jvm_opts, system_options)
        the_system.client_config = dict(client_config or {})  # for a system that asks the cluster first
        check_storage(storage, chosen)
        chosen.check()
        _refuse_running(name, chosen)
        the_system.install(progress)
        state = {
            "name": name,
            "backend": {"name": backend, "options": dict(backend_options or {})},
            "system": {"name": system, "version": the_system.version},
            "brokers": nodes,
            "up_seconds": None,
            "storage": storage,
        }
        _write_state(state)
        try:
            state["backend"].update(chosen.provision(name, the_system.node_names(nodes), progress))
            _write_state(state)
            the_nodes = chosen.nodes(name, state["backend"])
            the_system.deploy(
                name, the_nodes, progress, controller_address=chosen.controller_address(name, state["backend"])
            )
            state["system"] = the_system.state()
            _write_state(state)
            lab = cls(state, client_config)
            if lab.nodes:
                progress(
                    f"lab {name}: starting {the_system.name} {the_system.version} on "
                    f"{', '.join(n.name for n in lab.nodes)}" + (" (data on powerfs)" if storage == "powerfs" else "")
                )
            for node in lab.nodes:
                lab.start_node(node.name)
            elapsed = lab.wait_healthy(timeout=timeout, progress=progress, since=started)
            lab.up_seconds = state["up_seconds"] = round(elapsed, 2)
            _write_state(state)
            return lab
        except BaseException:
            saved = _save_logs(state)
            progress(f"lab {name}: setup failed, tearing down (logs kept in {saved})")
            cls.down(name, progress=lambda _m: None)
            raise

    @classmethod
    def attach(
        cls, name: str | None = None, backend: str = "local", client_config: dict | None = None, alive: bool = True
    ) -> "Lab":
        """The running lab named `name`, from its state file; StaleLab if its
        machines are gone (with alive=False the caller asks `stale()` itself)."""
        name = lab_name(name, backend)
        state = read_state(name)
        if state is None:
            raise GregorError(f"no lab named {name!r} is up; start one with: gregor lab up --lab {name}")
        if unfinished(state):
            raise StaleLab(name, state["backend"]["name"], UNFINISHED)
        lab = cls(state, client_config)
        if alive:
            why = lab.stale()
            if why:
                raise StaleLab(name, lab.backend.name, why)
        return lab

    def stale(self) -> str | None:
        """Why this lab's machines are gone (None: they are there), asked of
        the backend before anything else reaches them; what it learned on
        the way (an older SSH lab's routes) is saved in the state file."""
        self._reload()
        before = json.dumps(self._state["backend"], sort_keys=True)
        why = self.backend.stale(self.name, self._state["backend"])
        if why is None and json.dumps(self._state["backend"], sort_keys=True) != before:
            _write_state(self._state)
        return why

    @classmethod
    def down(
        cls,
        name: str | None = None,
        progress: Callable[[str], None] | None = print,
        backend: str | None = None,
        backend_options: dict | None = None,
    ) -> None:
        """Removes every trace of the lab; safe to repeat, works after a crash.

        Without a state file the lab is looked for by name on `backend`, or on
        every backend that can be asked without starting anything."""
        progress = progress or (lambda _message: None)
        name = lab_name(name, backend or "local")
        state = read_state(name)
        if state is not None:
            backends = [(state["backend"]["name"], state["backend"].get("options", {}))]
        elif backend is not None:
            backends = [(backend, backend_options or {})]
        else:
            backends = [(b, {}) for b in registry.BACKENDS if registry.backend(b).can_look_without_starting()]
        done: list[str] = []
        gone = None  # why the lab's machines are gone: nothing may be sent to them
        clients = state["backend"].get("clients", {}) if state is not None else {}
        swept = wire_relay.sweep(name, [netns.ns_name(name, client) for client in clients])
        # the brokers' relay holds the node namespaces open; the rules in them go with them
        swept_brokers = wire_relay.sweep(wire_relay.brokers_tag(name))
        if swept["relays"] + swept_brokers["relays"]:
            done.append(f"{swept['relays'] + swept_brokers['relays']} wire relay(s)")
        for backend_name, options in backends:
            chosen = registry.backend(backend_name, **options)
            if state is not None and state.get("system", {}).get("name"):
                try:
                    registry.restore_system(state["system"]).teardown(name, state["system"], progress)
                except GregorError as error:
                    progress(f"lab {name}: {error}")
            if state is not None and state["backend"].get("nodes") is not None:
                # local evidence only: the teardown itself reaches each host that is there, or names it
                gone = chosen.stale(name, state["backend"], local_only=True)
            done += chosen.teardown(name, state["backend"] if state else None, progress, machines_gone=bool(gone))
        state_path(name).unlink(missing_ok=True)
        if gone:
            left = f"removed what was left here ({', '.join(done)})" if done else "nothing left to clean"
            progress(f"lab {name}: its machines were gone: {gone}; {left}; its state file is removed")
        elif state or done:
            progress(f"lab {name}: down ({', '.join(done) or 'nothing was running'})")
        else:
            progress(f"lab {name}: nothing to remove")

    # --- health and status ------------------------------------------------------------
    def wait_healthy(
        self,
        topics: list[str] | None = None,
        timeout: float = 60,
        progress: Callable[[str], None] | None = None,
        since: float | None = None,
    ) -> float:
        """Waits until every partition has a leader (and, where the system
        replicates, a full ISR) in every broker's view; returns seconds taken.

        Without `topics` it checks (creating if needed) the lab's health topic,
        one partition per node, replicated as the system does by default.
        """
        since = time.monotonic() if since is None else since
        deadline = time.monotonic() + timeout
        admin = self.admin(timeout=5)
        rf = self.system.replication(len(self.nodes))
        created = topics is not None
        topics = list(topics or [HEALTH_TOPIC])
        last = "no answer yet"
        while True:
            dead = [n.name for n in self.nodes if n.state() == "dead"]
            if dead and not created:
                saved = _save_logs(self._state)
                raise GregorError(
                    f"the system on {', '.join(dead)} exited during startup; its log is kept in "
                    f"{saved / (dead[0] + '.log')}"
                )
            try:
                if not created:
                    admin.create_topic(HEALTH_TOPIC, partitions=max(1, len(self.nodes)), replication_factor=rf)
                    created = True
                bad = self.system.unhealthy(self, topics)
                if not bad:
                    elapsed = time.monotonic() - since
                    if progress:
                        progress(
                            f"lab {self.name}: healthy after {elapsed:.1f} s (every partition of "
                            f"{', '.join(topics)} has a leader and {rf} in-sync replicas)"
                        )
                    return elapsed
                last = "; ".join(bad[:3])
            except GregorError as error:
                last = str(error)
            if time.monotonic() > deadline:
                raise GregorError(f"lab {self.name} not healthy after {timeout:.0f} s: {last}")
            time.sleep(0.25)

    def status(self) -> dict:
        """Nodes, addresses, process states, roles and partition leaders."""
        result = {
            "name": self.name,
            "backend": self.backend.name,
            "system": self.system.name,
            "version": self.version,
            "bootstrap_servers": self.bootstrap_servers,
            "nodes": [
                {
                    "name": n.name,
                    "address": n.address,
                    "pid": n.pid() if n.service else None,
                    "state": n.state() if n.service else "not ours",
                    "log": n.service.log if n.service else None,
                }
                for n in self.nodes
            ],
            "clients": dict(self._state["backend"].get("clients", {})),
            "controller": None,
            "leaders": {},
            "errors": [],
        }
        from ground.protocols import RoleUnavailable

        try:
            result["controller"] = self.roles().controller()
        except RoleUnavailable as why:
            result["controller"] = f"unavailable ({why})"
        except GregorError as error:
            result["errors"].append(str(error))
        admin = self.admin(timeout=3)
        try:
            for topic in admin.topics():
                result["leaders"][topic] = {
                    pid: {**part, "leader_node": self._node_name(part["leader"])}
                    for pid, part in admin.partitions(topic).items()
                }
        except Exception as error:  # noqa: BLE001 - status reports what it could not learn
            result["errors"].append(f"metadata: {error}")
        return result

    def _node_name(self, broker_id: int) -> str | None:
        from ground.protocols import RoleUnavailable

        try:
            return self.system.node_of(broker_id) if broker_id >= 0 else None
        except (GregorError, RoleUnavailable):
            return None

    # --- clients and healing ------------------------------------------------------------
    def client_place(self, name: str, create: bool = True) -> ClientPlace | None:
        """A place of its own for one client (created on first use), on the
        lab's network, so that the nemesis can cut it off; with create=False,
        None unless it exists."""
        self._reload()
        if not create and name not in self._state["backend"].get("clients", {}):
            return None
        place = self.backend.client_place(self.name, self._state["backend"], name)
        _write_state(self._state)
        return place

    def place_node(self, place: ClientPlace):
        """A client place as a node without a system process: its network primitives."""
        return self.backend.place_node(self.name, place)

    def client_places(self) -> list[ClientPlace]:
        self._reload()
        return [
            self.backend.client_place(self.name, self._state["backend"], name)
            for name in sorted(self._state["backend"].get("clients", {}))
        ]

    def remove_client_place(self, name: str) -> None:
        self._reload()
        self.backend.remove_client_place(self.name, self._state["backend"], name)
        _write_state(self._state)

    # --- the wire relay of the clients (harness/wire_relay.py) ---------------------------
    def start_wire(self, places: list[ClientPlace], log_path: str | None = None) -> dict:
        """Puts the lab's wire relay between these client places and the brokers, before the
        clients connect; returns what it serves: {"control", "places": {place: namespace}, "ports"}."""
        namespaces = {place.name: place.handle["netns"] for place in places}
        dests = [server.strip() for server in self.bootstrap_servers.split(",")]
        self._wire_process, ready = wire_relay.start(self.name, list(namespaces.values()), dests, log_path)
        return {"control": ready["control"], "places": namespaces, "ports": ready["netns"], "dests": dests}

    def start_broker_wire(self, log_path: str | None = None) -> dict:
        """Puts a wire relay on the brokers' own connections to each other (broker sources), before
        the run's clients start: it serves each broker node's namespace, where it redirects the
        connections to the inter-broker listeners; then the connections the brokers opened before
        it are cut once, so that they reopen through it. Returns what it serves:
        {"control", "places": {node: namespace}, "ports", "dests", "cut": {node: connections cut}}."""
        if WIRE not in self.node_faults():
            raise GregorError(
                f"wire faults on the brokers' own traffic need Apache Kafka, "
                f"not {self.system.name} on {self.backend.name}"
            )
        nodes = self.system.inter_broker_nodes(self.nodes)
        dests = self.system.inter_broker_servers(self.nodes)
        tag = wire_relay.brokers_tag(self.name)
        if self._wire_on_nodes():
            served = self._start_node_relays(nodes, tag, dests)
        else:
            namespaces = {node.name: node.namespace for node in nodes}
            self._broker_wire_process, ready = wire_relay.start(tag, list(namespaces.values()), dests, log_path)
            served = {"control": ready["control"], "places": namespaces, "ports": ready["netns"], "dests": dests}
        try:
            served["cut"] = {node.name: wire_relay.cut_connections(node, dests) for node in nodes}
            served["reconnected"] = self._reconnected_through_wire(served)
        except GregorError:
            self.sweep_wire()
            raise
        return served

    def _wire_on_nodes(self) -> bool:
        """Whether the brokers' relay runs on each node (docker, ssh: harness/wire_nodes.py) rather
        than once on this host, entering the nodes' namespaces (the namespaces backend)."""
        return getattr(self.backend, "wire_relay_on_nodes", False)

    def _start_node_relays(self, nodes: list, tag: str, dests: list[str]) -> dict:
        """One relay per broker node, on the node; a node's "place" is its own name."""
        ports = {}
        try:
            for node in nodes:
                ports[node.name] = wire_nodes.start(node, tag, dests)["port"]
        except GregorError:
            self.sweep_wire()
            raise
        return {
            "control": f"NODE:{default_control(tag)} (on each node)",
            "places": {node.name: node.name for node in nodes},
            "ports": ports,
            "dests": dests,
            "on_nodes": True,
            "logs": {node.name: wire_nodes.log_path(node) for node in nodes},
        }

    def _reconnected_through_wire(self, served: dict, timeout: float = 30.0) -> dict:
        """Waits until every node whose connections were cut has opened one again through the
        brokers' relay (a replica fetcher does within seconds); returns the relay's links per node."""
        deadline = time.monotonic() + timeout
        while True:
            links = self.wire_call({"op": "links"}, brokers=True)["links"]
            by_node = {
                node: sum(1 for link in links if link["netns"] == namespace)
                for node, namespace in served["places"].items()
            }
            if all(by_node[node] for node, cut in served["cut"].items() if cut) or time.monotonic() >= deadline:
                return by_node
            time.sleep(0.2)

    def wire_call(self, request: dict, brokers: bool = False) -> dict:
        """One request to the lab's wire relay (brokers: the one on the brokers' own connections,
        docs/WIRE.md); GregorError if it refuses or is gone."""
        if brokers and self._wire_on_nodes():
            nodes = self.system.inter_broker_nodes(self.nodes)
            return wire_nodes.ask_all(nodes, wire_relay.brokers_tag(self.name), request)
        return wire_relay.ask(wire_relay.brokers_tag(self.name) if brokers else self.name, request)

    def sweep_wire(self) -> dict:
        """Ends the lab's wire relays (their rules go first) and removes every REDIRECT rule of
        theirs left in the client places and the nodes; after a crash too. Safe to call any time."""
        self._reload()
        clients = self._state["backend"].get("clients", {})
        swept = wire_relay.sweep(self.name, [netns.ns_name(self.name, client) for client in clients])
        tag = wire_relay.brokers_tag(self.name)
        if self._wire_on_nodes():
            on_nodes = {"relays": 0, "killed": 0, "redirects_removed": 0}
            for node in self.nodes:
                for key, value in wire_nodes.sweep(node, tag).items():
                    on_nodes[key] += value
        else:
            node_spaces = [node.namespace for node in self.nodes if getattr(node, "namespace", None)]
            on_nodes = wire_relay.sweep(tag, node_spaces)
        for attribute in ("_wire_process", "_broker_wire_process"):
            process = getattr(self, attribute, None)
            if process is not None:
                process.wait(timeout=10)
                setattr(self, attribute, None)
        return {key: swept[key] + on_nodes[key] for key in swept}

    def heal_all(self) -> None:
        """Every fault undone: links healed, netem cleared, processes resumed
        or restarted, the wire relay swept, client places removed. Safe to call any time."""
        self._heal_nodes()
        self.sweep_wire()
        self._reload()
        for client in list(self._state["backend"].get("clients", {})):
            self.remove_client_place(client)

    def heal_in_run(self) -> dict:
        """Every fault undone while a run goes on: the nodes as heal_all heals them, and every
        rule of the wire relays switched off, but the relays and the client places stay, since
        the run's clients connect through them (heal_all would cut them off mid-run).
        Returns how many rules it switched off per relay ({"clients": n, "brokers": n})."""
        self._heal_nodes()
        cleared = {}
        for relay, brokers in (("clients", False), ("brokers", True)):
            try:
                cleared[relay] = len(self.wire_call({"op": "clear"}, brokers=brokers)["reports"])
            except GregorError:  # no such relay in this run
                cleared[relay] = 0
        self._reload()
        return cleared

    def _heal_nodes(self) -> None:
        for node in self.nodes:
            node.heal_network()
            node.clear_netem()
            if node.service is None:  # a host of a cluster Gregor did not start: its processes are not ours
                continue
            state = node.state()
            if state == "paused":
                node.resume()
            elif state == "dead":
                self.start_node(node.name)

    def collect(self, run_dir: str) -> None:
        """Each node's logs and configs into the run's nodes/<node>/ (never fails a run)."""
        for node in self.nodes:
            target = os.path.join(run_dir, "nodes", node.name)
            try:
                self.backend.collect(self.name, self._state["backend"], node, target)
            except Exception as error:  # noqa: BLE001 - the history matters more than the logs
                os.makedirs(target, exist_ok=True)
                with open(os.path.join(target, "collect-error.txt"), "w") as handle:
                    handle.write(f"could not collect {node.name}'s files: {error}\n")

    def _reload(self) -> None:
        """Picks up client places another process added to the state file."""
        current = read_state(self.name)
        if current is not None:
            self._state["backend"]["clients"] = current["backend"].get("clients", {})


def check_storage(storage: str, backend) -> None:
    """powerfs needs a backend that can cut power (Backend.faults lists power-loss)."""
    from ground.faults import POWER_LOSS

    if storage not in STORAGES:
        raise GregorError(f"unknown storage {storage!r}; choose one of {', '.join(STORAGES)}")
    if storage == "powerfs" and POWER_LOSS not in backend.faults:
        raise GregorError(
            f"the {backend.name} backend cannot serve a node's data from powerfs, so it "
            "cannot cut power; use --backend local"
        )


def _write_state(state: dict) -> None:
    write_json(state_path(state["name"]), state, indent=2)


def _save_logs(state: dict):
    """Copies the system's logs off the nodes before a failed `up` removes them."""
    target = failed_dir() / state["name"]
    target.mkdir(parents=True, exist_ok=True)
    try:
        lab = Lab(state)
    except Exception:  # noqa: BLE001 - the lab may be too broken to describe
        return target
    for node in lab.nodes:
        try:
            node.download(node.service.log, str(target / f"{node.name}.log"))
        except Exception:  # noqa: BLE001 - keep what can be kept
            continue
    return target


def _refuse_running(name: str, backend) -> None:
    """A lab of this name that is (partly) up must be taken down first."""
    state = read_state(name)
    if state is None and not backend.busy(name):
        return
    shape = ""
    if state:
        shape = f" ({state['backend']['name']} backend, {state['system'].get('name')} {state['system'].get('version')})"
    raise GregorError(f"lab {name!r} is already up{shape}; run: gregor lab down --lab {name} (or use another --lab)")
