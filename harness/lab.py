"""A local lab: a real Kafka cluster, one network namespace per node.

Layout (lab name L, nodes n1..nN):
  /run/gregor/L.json                state file: everything `attach` and `down` need
  /var/lib/gregor/labs/L/<node>/    server.properties, data/, broker.log, broker.pid
  namespaces L-n1.., L-<client>     each with eth0 on bridge L-br
  subnet 10.a.b.0/24 from the name  bridge .1, node i at .(10+i), clients .100+

`Lab.up` writes the state file before it creates anything, and tears down
whatever it made if it fails or is interrupted, so a lab is never half up.
`Lab.down` also works from names alone when the state file is gone.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness import kafka_config, kafka_install, kafka_wire, netns
from harness.errors import GregorError
from harness.kafka_admin import KafkaAdmin
from harness.local_node import Node, proc_cmdline, reap_children
from harness.paths import state_dir

LABS_DIR = Path(os.environ.get("GREGOR_LABS_DIR", "/var/lib/gregor/labs"))
FAILED_DIR = Path(os.environ.get("GREGOR_FAILED_DIR", "/var/lib/gregor/failed"))
HEALTH_TOPIC = "gregor-health"
MAX_NODES = 15
FIRST_CLIENT_HOST = 100


def lab_name(name: str | None) -> str:
    return netns.check_lab_name(name or os.environ.get("GREGOR_LAB") or "gregor")


def state_path(name: str) -> Path:
    return state_dir() / f"{name}.json"


def require_root() -> None:
    if os.geteuid() != 0:
        raise GregorError("the lab needs root (network namespaces, iptables, tc); run with sudo")


def require_java() -> None:
    if shutil.which("java") is None:
        raise GregorError("java not found; install a JDK 17+ (apt-get install openjdk-17-jdk-headless)")


def new_cluster_id() -> str:
    """A Kafka-style base64 UUID; never one starting with '-', which the
    storage tool would read as an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


@dataclass(frozen=True)
class ClientNamespace:
    """A namespace of its own on the lab bridge, for clients the nemesis can cut off."""

    name: str
    namespace: str
    ip: str

    def exec_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.namespace]


class Lab:
    """A running local lab; build one with `Lab.up` or `Lab.attach`."""

    def __init__(self, state: dict):
        self._state = state
        self.name: str = state["name"]
        self.version: str = state["version"]
        self.subnet = ipaddress.IPv4Network(state["subnet"])
        self.lab_dir = Path(state["lab_dir"])
        self.broker_config: dict[str, str] = dict(state["broker_config"])
        self.up_seconds: float | None = state.get("up_seconds")
        classpath = str(Path(state["kafka_home"]) / "libs" / "*")
        jvm_opts = list(state["jvm_opts"])
        self.nodes: list[Node] = [
            Node(name=n["name"], ip=n["ip"], broker_id=n["broker_id"],
                 namespace=netns.ns_name(self.name, n["name"]),
                 node_dir=self.lab_dir / n["name"], classpath=classpath, jvm_opts=jvm_opts)
            for n in state["nodes"]
        ]

    # --- lookups ------------------------------------------------------------
    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise GregorError(f"lab {self.name} has no node {name!r}; nodes: {', '.join(n.name for n in self.nodes)}")

    def node_for_broker(self, broker_id: int) -> Node:
        for node in self.nodes:
            if node.broker_id == broker_id:
                return node
        raise GregorError(f"lab {self.name} has no broker {broker_id}")

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{n.ip}:{kafka_config.BROKER_PORT}" for n in self.nodes)

    @property
    def bridge_ip(self) -> str:
        return self._state["bridge_ip"]

    def admin(self, timeout: float = 10) -> KafkaAdmin:
        return KafkaAdmin(self.bootstrap_servers, timeout=timeout)

    # --- lifecycle ------------------------------------------------------------
    @classmethod
    def up(cls, nodes: int = 3, version: str | None = None, broker_overrides: dict | None = None,
           name: str | None = None, progress: Callable[[str], None] = print,
           jvm_opts: list[str] | None = None, timeout: float = 120) -> "Lab":
        """Creates namespaces, formats storage, starts every broker, waits until healthy."""
        started = time.monotonic()
        progress = progress or (lambda _message: None)
        name = lab_name(name)
        version = kafka_install.check_version(version or kafka_install.DEFAULT_VERSION)
        if not isinstance(nodes, int) or nodes < 1:
            raise GregorError(f"node count must be at least 1, got {nodes}")
        if nodes > MAX_NODES:
            raise GregorError(f"node count must be at most {MAX_NODES}, got {nodes}")
        require_root()
        require_java()
        _refuse_running(name, nodes, version)
        subnet = netns.lab_subnet(name)
        holder = netns.subnet_in_use(subnet, except_dev=netns.bridge_name(name))
        if holder is not None:
            raise GregorError(f"subnet {subnet} of lab {name!r} is already used by {holder}; choose another --lab name")
        install = kafka_install.installed(version) or kafka_install.install(version, progress=progress)
        hosts = list(subnet.hosts())
        node_ips = {f"n{i}": str(hosts[9 + i]) for i in range(1, nodes + 1)}
        overrides = {str(k): str(v) for k, v in (broker_overrides or {}).items()}
        state = {
            "name": name, "version": version, "subnet": str(subnet), "bridge_ip": str(hosts[0]),
            "lab_dir": str(LABS_DIR / name), "kafka_home": str(install.home),
            "jvm_opts": [*(jvm_opts or kafka_config.DEFAULT_JVM_OPTS), install.log4j_jvm_flag()],
            "log4j_flag": install.log4j_jvm_flag(),
            "broker_config": {**kafka_config.default_settings(nodes), **overrides},
            "overrides": overrides, "cluster_id": new_cluster_id(),
            "nodes": [{"name": n, "ip": ip, "broker_id": i}
                      for i, (n, ip) in enumerate(node_ips.items(), 1)],
            "clients": {}, "up_seconds": None,
        }
        _write_state(state)
        try:
            lab = cls(state)
            lab._build(progress)
            elapsed = lab.wait_healthy(timeout=timeout, progress=progress, since=started)
            lab.up_seconds = state["up_seconds"] = round(elapsed, 2)
            _write_state(state)
            return lab
        except BaseException:
            saved = _save_logs(state)
            progress(f"lab {name}: setup failed, tearing down (broker logs kept in {saved})")
            cls.down(name, progress=lambda _m: None)
            raise

    def _build(self, progress: Callable[[str], None]) -> None:
        prefix = self.subnet.prefixlen
        progress(f"lab {self.name}: bridge {netns.bridge_name(self.name)} {self.bridge_ip}/{prefix}, "
                 f"{len(self.nodes)} namespaces")
        netns.create_bridge(self.name, self.bridge_ip, prefix)
        voters = ",".join(f"{n.broker_id}@{n.ip}:{kafka_config.CONTROLLER_PORT}" for n in self.nodes)
        shutil.rmtree(self.lab_dir, ignore_errors=True)
        for node in self.nodes:
            netns.create_member(self.name, node.name, node.ip, prefix, self.bridge_ip)
            node.data_dir.mkdir(parents=True, exist_ok=True)
            props = kafka_config.node_properties(node.broker_id, node.ip, voters, node.data_dir,
                                                 len(self.nodes), self._state["overrides"])
            node.config_path.write_text(kafka_config.render(props))
        progress(f"lab {self.name}: formatting storage (cluster id {self._state['cluster_id']})")
        self._format_storage()
        progress(f"lab {self.name}: starting Kafka {self.version} on {', '.join(n.name for n in self.nodes)}")
        for node in self.nodes:
            node.start()

    def _format_storage(self) -> None:
        """kafka.tools.StorageTool on every node at once (one JVM each, run in parallel)."""
        jobs = []
        for node in self.nodes:
            cmd = ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   self._state["log4j_flag"], "-cp", node.classpath, "kafka.tools.StorageTool",
                   "format", "-t", self._state["cluster_id"], "-c", str(node.config_path)]
            jobs.append((node, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
        for node, job in jobs:
            out, _ = job.communicate(timeout=120)
            if job.returncode != 0:
                last = (out.strip().splitlines() or ["no output"])[-1]
                raise GregorError(f"{node.name}: formatting storage failed: {last}")

    @classmethod
    def attach(cls, name: str | None = None) -> "Lab":
        """The running lab named `name`, from its state file."""
        name = lab_name(name)
        try:
            state = json.loads(state_path(name).read_text())
        except FileNotFoundError:
            raise GregorError(f"no lab named {name!r} is up; start one with: gregor lab up --lab {name}") from None
        return cls(state)

    @classmethod
    def down(cls, name: str | None = None, progress: Callable[[str], None] = print) -> None:
        """Removes every trace of the lab; safe to repeat, works after a crash."""
        progress = progress or (lambda _message: None)
        name = lab_name(name)
        require_root()
        lab_dir = LABS_DIR / name
        try:
            state = json.loads(state_path(name).read_text())
            lab_dir = Path(state.get("lab_dir", lab_dir))
        except (FileNotFoundError, ValueError):
            state = None
        killed = _kill_lab_processes(lab_dir)
        prefix = f"{name}-"
        netns.stop_emulators(prefix, prefix=True)  # a crashed run's netem emulators would keep the namespaces alive
        spaces = [ns for ns in netns.namespaces() if ns.startswith(prefix)]
        for ns in spaces:
            netns.quiet(["ip", "netns", "del", ns])
        for link in _links_with_prefix(prefix):
            netns.quiet(["ip", "link", "del", link])
        netns.delete_bridge(name)
        shutil.rmtree(lab_dir, ignore_errors=True)
        state_path(name).unlink(missing_ok=True)
        if state or spaces or killed:
            progress(f"lab {name}: down ({killed} broker processes killed, {len(spaces)} namespaces removed)")
        else:
            progress(f"lab {name}: nothing to remove")

    # --- health and status --------------------------------------------------
    def wait_healthy(self, topics: list[str] | None = None, timeout: float = 60,
                     progress: Callable[[str], None] | None = None, since: float | None = None) -> float:
        """Waits until every partition has a leader and a full ISR; returns seconds taken.

        Every broker is asked on its own and all must agree, because brokers
        learn metadata at different moments and one early view proves little.

        Without `topics` it checks (creating if needed) the lab's health topic,
        one partition per node with min(3, nodes) replicas.
        """
        since = time.monotonic() if since is None else since
        deadline = time.monotonic() + timeout
        admin = self.admin(timeout=5)
        rf = min(3, len(self.nodes))
        created = topics is not None
        topics = list(topics or [HEALTH_TOPIC])
        last = "no answer yet"
        while True:
            dead = [n.name for n in self.nodes if n.state() == "dead"]
            if dead and not created:
                raise GregorError(f"broker on {', '.join(dead)} exited during startup; its log is kept in "
                                  f"{FAILED_DIR / self.name / (dead[0] + '.log')}")
            try:
                if not created:
                    admin.create_topic(HEALTH_TOPIC, partitions=len(self.nodes), replication_factor=rf)
                    created = True
                bad = self._unhealthy(topics)
                if not bad:
                    elapsed = time.monotonic() - since
                    if progress:
                        progress(f"lab {self.name}: healthy after {elapsed:.1f} s "
                                 f"(every partition of {', '.join(topics)} has a leader and {rf} in-sync replicas)")
                    return elapsed
                last = "; ".join(bad[:3])
            except GregorError as error:
                last = str(error)
            if time.monotonic() > deadline:
                raise GregorError(f"lab {self.name} not healthy after {timeout:.0f} s: {last}")
            time.sleep(0.25)

    def _unhealthy(self, topics: list[str]) -> list[str]:
        """What keeps `topics` from being healthy in the view of every broker."""
        bad: list[str] = []
        leaders: dict[tuple[str, int], set[int]] = {}
        for node in self.nodes:
            try:
                view = kafka_wire.metadata(node.ip, kafka_config.BROKER_PORT, topics, timeout=3)
            except (OSError, GregorError) as error:
                return [f"{node.name} does not answer: {error}"]
            for topic in topics:
                found = view.get(topic)
                if found is None or found["error"] or not found["partitions"]:
                    bad.append(f"{node.name} does not know {topic} yet")
                    continue
                for pid, part in found["partitions"].items():
                    leaders.setdefault((topic, pid), set()).add(part["leader"])
                    if part["leader"] < 0 or sorted(part["isr"]) != sorted(part["replicas"]):
                        bad.append(f"{topic}/{pid} per {node.name}: leader {part['leader']} isr {part['isr']}")
        bad += [f"{t}/{p}: brokers disagree on the leader {sorted(l)}" for (t, p), l in leaders.items() if len(l) > 1]
        return bad

    def status(self) -> dict:
        """Nodes, addresses, process states, controller and partition leaders."""
        result = {
            "name": self.name, "version": self.version, "bootstrap_servers": self.bootstrap_servers,
            "nodes": [{"name": n.name, "ip": n.ip, "broker_id": n.broker_id, "pid": n.pid(),
                       "state": n.state(), "log": str(n.log_path)} for n in self.nodes],
            "clients": dict(self._state.get("clients", {})),
            "controller": None, "leaders": {}, "errors": [],
        }
        admin = self.admin(timeout=3)
        try:
            result["controller"] = admin.controller()
        except GregorError as error:
            result["errors"].append(str(error))
        try:
            for topic in admin.topics():
                result["leaders"][topic] = admin.partitions(topic)
        except Exception as error:  # noqa: BLE001 - status reports what it could not learn
            result["errors"].append(f"metadata: {error}")
        return result

    # --- clients and healing ------------------------------------------------
    def client_namespace(self, name: str) -> ClientNamespace:
        """A namespace of its own on the lab bridge (created on first use)."""
        netns.check_member_name(name)
        if any(n.name == name for n in self.nodes):
            raise GregorError(f"client namespace {name!r} clashes with a node name; pick another")
        _reload_clients(self)
        clients = self._state.setdefault("clients", {})
        ip = clients.get(name)
        if ip is None:
            used = set(clients.values())
            hosts = list(self.subnet.hosts())
            free = [str(h) for h in hosts[FIRST_CLIENT_HOST - 1:] if str(h) not in used]
            if not free:
                raise GregorError(f"lab {self.name} has no free client addresses left")
            ip = free[0]
        ns = netns.ns_name(self.name, name)
        if ns not in netns.namespaces():
            netns.create_member(self.name, name, ip, self.subnet.prefixlen, self.bridge_ip)
        clients[name] = ip
        _write_state(self._state)
        return ClientNamespace(name=name, namespace=ns, ip=ip)

    def remove_client_namespace(self, name: str) -> None:
        netns.check_member_name(name)
        _reload_clients(self)
        netns.delete_member(self.name, name)
        self._state.setdefault("clients", {}).pop(name, None)
        _write_state(self._state)

    def heal_all(self) -> None:
        """Every fault undone: links healed, netem cleared, brokers resumed or restarted."""
        for node in self.nodes:
            node.heal_network()
            node.clear_netem()
            state = node.state()
            if state == "paused":
                node.resume()
            elif state == "dead":
                node.start()
        _reload_clients(self)
        for client in list(self._state.get("clients", {})):
            self.remove_client_namespace(client)


def _reload_clients(lab: Lab) -> None:
    """Picks up client namespaces another process added to the state file."""
    try:
        current = json.loads(state_path(lab.name).read_text())
    except (FileNotFoundError, ValueError):
        return
    lab._state["clients"] = current.get("clients", {})


def _save_logs(state: dict) -> Path:
    """Copies broker logs out of the lab dir before a failed `up` removes it."""
    target = FAILED_DIR / state["name"]
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True, exist_ok=True)
    for node in state["nodes"]:
        log = Path(state["lab_dir"]) / node["name"] / "broker.log"
        if log.is_file():
            shutil.copyfile(log, target / f"{node['name']}.log")
    return target


def _write_state(state: dict) -> None:
    path = state_path(state["name"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(path)


def _refuse_running(name: str, nodes: int, version: str) -> None:
    """A lab of this name that is (partly) up must be taken down first."""
    leftovers = [ns for ns in netns.namespaces() if ns.startswith(f"{name}-")]
    try:
        state = json.loads(state_path(name).read_text())
    except (FileNotFoundError, ValueError):
        state = None
    if state is None and not leftovers and not netns.link_exists(netns.bridge_name(name)):
        # Brokers of an older crashed lab whose namespaces are gone would still
        # hold the data dir we are about to recreate.
        _kill_lab_processes(LABS_DIR / name)
        return
    shape = ""
    if state:
        shape = f" ({len(state['nodes'])} nodes, Kafka {state['version']})"
        if len(state["nodes"]) != nodes or state["version"] != version:
            shape += f", not the {nodes} nodes / Kafka {version} asked for"
    raise GregorError(
        f"lab {name!r} is already up{shape}; run: gregor lab down --lab {name} (or use another --lab)"
    )


def _kill_lab_processes(lab_dir: Path) -> int:
    """SIGKILLs every process whose command line points into the lab directory."""
    marker = f"{lab_dir}/"
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        if any(marker in arg for arg in proc_cmdline(pid)):
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                continue
    deadline = time.monotonic() + 10
    while killed and time.monotonic() < deadline:
        # A dead process has an empty cmdline (zombie) or none at all.
        remaining = [p for p in Path("/proc").iterdir() if p.name.isdigit()
                     and any(marker in a for a in proc_cmdline(int(p.name)))]
        if not remaining:
            break
        time.sleep(0.05)
    reap_children()
    return killed


def _links_with_prefix(prefix: str) -> list[str]:
    out = netns.run(["ip", "-o", "link", "show"], check=False).stdout
    links = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) > 1:
            link = parts[1].strip().split("@")[0]
            if link.startswith(prefix):
                links.append(link)
    return links
