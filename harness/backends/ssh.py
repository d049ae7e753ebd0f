"""The SSH backend: each node a host reached over SSH (Vagrant VMs, bare metal).

Hosts come from `--hosts user@host[:port],...` with `--ssh-key`, or from a
Vagrant lab (`--vagrant DIR`, vagrant/README.md). Every node operation is a
command line sent over the node's one SSH connection (ssh_connect.py), its
argument list quoted for the remote shell, run as root (through `sudo -n`
when the login user is not root). The faults are ExecNode's, so they are
the same iptables chains, tc or NFQUEUE emulation and signals as on every
other backend.

Layout on each host (lab L, node n):
  /var/lib/gregor/labs/L/n/        the node's home: configs, data, logs, tools/ (our netem emulator)
  ~/.cache/gregor/files/<sha256>/  what was uploaded (Kafka's jars), kept for the next lab
  iptables chains GREGOR-IN/OUT/NETEM, a netem or tbf qdisc while a fault holds
`gregor lab down` removes all of it but the cache, found by the lab's name,
also after a crash of the controller (with --hosts or --vagrant when the lab's
state file is gone).
"""

from __future__ import annotations

import shlex
import socket
import subprocess
import threading
from pathlib import Path
from typing import Sequence

from ground.errors import GregorError
from ground.faults import NODE_FAULTS, WIRE
from harness.backends import netns, ssh_alive, ssh_files
from harness.backends.bridge_places import remove_namespaces
from harness.backends.ssh_connect import Connection, Trust, default_known_hosts
from harness.backends.ssh_hosts import SshHost, parse_hosts, vagrant_hosts
from harness.backends.ssh_places import NatPlaces, close_gateway, gateway_leftovers
from harness.node import ExecNode

LAB_ROOT = "/var/lib/gregor/labs"  # on each host
HARNESS_DIR = Path(__file__).resolve().parent.parent
TOOL_FILES = ("nfqueue_netem.py",)
DEVICE_FILE = ".device"  # the interface faults act on, for a teardown without state

# What every host needs, by the Debian package that has it.
TOOLS = {
    "iptables": "iptables",
    "tc": "iproute2",
    "ip": "iproute2",
    "ss": "iproute2",
    "kill": "procps",
    "python3": "python3",
    "setsid": "util-linux",
    "timeout": "coreutils",
    "sha256sum": "coreutils",
}

# Starts "$@" in a session of its own, detached from the SSH channel, its
# output appended to the log; prints its pid once the pid file holds it.
_SPAWN = r"""
pid_file=$1; log=$2; dir=$3; shift 3
rm -f "$pid_file"
mkdir -p "$(dirname "$log")" "$(dirname "$pid_file")" && cd "$dir" || exit 1
setsid sh -c 'echo $$ > "$1.new" && mv "$1.new" "$1"; log=$2; shift 2; exec "$@" >> "$log" 2>&1 < /dev/null' \
  sh "$pid_file" "$log" "$@" > /dev/null 2>&1 < /dev/null &
i=0
while [ ! -s "$pid_file" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
cat "$pid_file"
"""

# What a host has and holds: missing tools, its IPv4 addresses, labs of ours.
_PREFLIGHT = r"""
for tool in "$@"; do command -v "$tool" > /dev/null 2>&1 || echo "missing $tool"; done
ip -o -4 addr show 2>/dev/null | while read -r _ dev _ cidr _; do echo "addr $dev ${cidr%/*}"; done
for dir in "$LAB_ROOT"/*/; do [ -d "$dir" ] && echo "lab $(basename "$dir")"; done
exit 0
"""

# Removes everything of lab $2 under root $1 from this host. The lab's
# directory is never written whole on this command line, so the loop that
# kills the processes whose command line names it never matches itself.
_TEARDOWN = r"""
root=$1; lab=$2; dir="$root/$lab"
pids() {
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}; [ "$pid" = "$$" ] && continue
    case "$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)" in *"$dir/"*) echo "$pid";; esac
  done
}
n=0
for pid in $(pids); do kill -CONT "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null && n=$((n+1)); done
i=0; while [ -n "$(pids)" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
[ $n -gt 0 ] && echo "$n processes killed"
for dev in $(cat "$dir"/*/.device 2>/dev/null | sort -u); do
  if tc qdisc show dev "$dev" root 2>/dev/null | grep -Eq 'qdisc (netem|tbf)'; then
    tc qdisc del dev "$dev" root 2>/dev/null && echo "qdisc on $dev removed"
  fi
done
for pair in "INPUT GREGOR-IN" "OUTPUT GREGOR-OUT" "OUTPUT GREGOR-NETEM"; do
  set -- $pair
  while iptables -w -D "$1" -j "$2" 2>/dev/null; do :; done
  iptables -w -F "$2" 2>/dev/null && iptables -w -X "$2" 2>/dev/null && echo "chain $2 removed"
done
wire=$(iptables-save -t nat 2>/dev/null | grep -cF -- "gregor-wire:$lab.")
iptables-save -t nat 2>/dev/null | grep -F -- "gregor-wire:$lab." | sed 's/^-A //' | while read -r rule; do
  eval "iptables -w -t nat -D $rule" 2>/dev/null
done
[ "$wire" -gt 0 ] && echo "$wire wire relay rules removed"
[ -d "$dir" ] && rm -rf "$dir" && echo "$dir removed"
rmdir "$root" "$(dirname "$root")" 2>/dev/null
exit 0
"""

# What of lab $2 is still on this host (the same checks as _TEARDOWN).
_LEFTOVERS = r"""
root=$1; lab=$2; dir="$root/$lab"
for p in /proc/[0-9]*; do
  pid=${p#/proc/}; [ "$pid" = "$$" ] && continue
  case "$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)" in *"$dir/"*) echo "process $pid";; esac
done
for chain in GREGOR-IN GREGOR-OUT GREGOR-NETEM; do iptables -w -S "$chain" > /dev/null 2>&1 && echo "chain $chain"; done
iptables-save -t nat 2>/dev/null | grep -qF -- "gregor-wire:$lab." && echo "wire relay rules"
for dev in $(cat "$dir"/*/.device 2>/dev/null | sort -u); do
  tc qdisc show dev "$dev" root 2>/dev/null | grep -Eq 'qdisc (netem|tbf)' && echo "qdisc on $dev"
done
[ -d "$dir" ] && echo "dir $dir"
exit 0
"""

_pool: dict[tuple, Connection] = {}
_pool_lock = threading.Lock()


def connection(host: SshHost, trust: Trust, name: str | None = None) -> Connection:
    """The one connection to `host` in this process (per node name, which its messages give)."""
    key = (host, trust, name)
    with _pool_lock:
        if key not in _pool:
            _pool[key] = Connection(host, trust, f"{name} ({host.where()})" if name else host.where())
        return _pool[key]


def close_connections() -> None:
    with _pool_lock:
        for conn in _pool.values():
            conn.close()
        _pool.clear()


class SshNode(ExecNode):
    """A node that is a host reached over SSH."""

    python = "python3"  # the host's own, for our node-side tools

    def __init__(
        self, name: str, address: str, home: str, lab: str, host: SshHost, conn: Connection, device: str = "eth0"
    ):
        super().__init__(name, address, home)
        self.lab = lab
        self.host = host
        self.connection = conn
        self.device = device

    @property
    def label(self) -> str:
        return f"{self.name} ({self.host.where()})" if self.name else self.host.where()

    def _as_root(self) -> list[str]:
        return [] if self.host.user == "root" else ["sudo", "-n", "--"]

    def exec(
        self, argv: Sequence[str], *, check: bool = True, timeout: float = 30, stdin: str | None = None
    ) -> subprocess.CompletedProcess:
        command = shlex.join([*self._as_root(), "timeout", "-s", "KILL", str(int(timeout) + 1), *argv])
        code, out, err = self.connection.run(command, stdin=None if stdin is None else stdin.encode(), timeout=timeout)
        result = subprocess.CompletedProcess(
            list(argv), code, out.decode(errors="replace"), err.decode(errors="replace")
        )
        if check and code != 0:
            raise GregorError(
                f"{self.label}: {' '.join(argv)} exited {code}: {(result.stderr or result.stdout).strip()[:300]}"
            )
        return result

    def spawn(
        self, argv: Sequence[str], *, log: str, pid_file: str, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> int:
        """Starts argv detached (setsid, all output to the log); never sent
        twice, so a connection lost meanwhile is an error, not a retry."""
        prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
        command = shlex.join(
            [*self._as_root(), "sh", "-c", _SPAWN, "sh", pid_file, log, cwd or self.home, *prefix, *argv]
        )
        code, out, err = self.connection.run(command, timeout=30, retry=False)
        text = out.decode(errors="replace").strip()
        if code != 0 or not text.isdigit():
            why = err.decode(errors="replace").strip() or f"no pid in {pid_file}"
            raise GregorError(f"{self.label}: {argv[0]} did not start: {why[:300]}")
        return int(text)

    def upload(self, local: str, remote: str) -> None:
        self.connection.with_sftp(lambda sftp: ssh_files.put_tree(sftp, local, remote))

    def download(self, remote: str, local: str) -> None:
        self.connection.with_sftp(lambda sftp: ssh_files.get_tree(sftp, remote, local))

    def provide(self, local_dir: str) -> str:
        """Uploaded once per host into its checksummed cache, found there afterwards."""
        return ssh_files.provide(self.connection, local_dir)

    def netem_tag(self) -> str:
        return f"{self.lab}-{self.name}"  # teardown ends the lab's emulators by this prefix


class SshBackend(NatPlaces):
    """Hosts over SSH: --hosts user@host[:port],... (--ssh-key) or --vagrant DIR."""

    name = "ssh"
    faults = frozenset(NODE_FAULTS) | {WIRE}
    wire_relay_on_nodes = True  # broker sources: the relay runs on each host (harness/wire_nodes.py)
    creates_machines = False  # its nodes are hosts that exist already (an external cluster's brokers, say)

    def __init__(
        self,
        hosts: str | None = None,
        ssh_key: str | None = None,
        vagrant: str | None = None,
        known_hosts: str | None = None,
        insecure_host_keys: bool = False,
    ):
        self.hosts_text = hosts
        self.ssh_key = ssh_key
        self.vagrant = vagrant
        self.trust = Trust(known_hosts or default_known_hosts(), bool(insecure_host_keys))
        self._hosts: list[SshHost] | None = None

    # --- where the hosts are --------------------------------------------------------------
    def given(self) -> bool:
        return bool(self.hosts_text or self.vagrant)

    def hosts(self) -> list[SshHost]:
        """From the options (--vagrant asks `vagrant ssh-config` once)."""
        if self._hosts is None:
            if self.hosts_text and self.vagrant:
                raise GregorError("give --hosts or --vagrant, not both")
            if self.vagrant:
                self._hosts = vagrant_hosts(self.vagrant, self.ssh_key)
            elif self.hosts_text:
                self._hosts = parse_hosts(self.hosts_text, self.ssh_key)
            else:
                raise GregorError(
                    "the ssh backend needs its hosts: --hosts user@host[:port],... with "
                    "--ssh-key FILE, or --vagrant DIR (a Vagrant lab, vagrant/README.md)"
                )
        return self._hosts

    def _state_hosts(self, state: dict | None) -> list[tuple[str | None, SshHost]]:
        if state and state.get("hosts"):
            return [(node["name"], SshHost.from_json(host)) for node, host in zip(state["nodes"], state["hosts"])]
        return [(None, host) for host in self.hosts()]

    def _connection(self, name: str | None, host: SshHost) -> Connection:
        return connection(host, self.trust, name)

    # --- the protocol ---------------------------------------------------------------------
    def can_look_without_starting(self) -> bool:
        return False  # without hosts there is nothing to look at

    def check(self) -> None:
        try:
            import paramiko  # noqa: F401
        except ImportError:
            raise GregorError("the paramiko Python package is missing; run ./setup (pip install paramiko)") from None
        self.hosts()

    def describe(self, state: dict) -> dict:
        """For test.json and the report: where the nodes are, and how their keys were checked (no secrets)."""
        hosts = self._state_hosts(state)
        return {
            "hosts": ", ".join(f"{name} {host.where()}" for name, host in hosts),
            "host_keys": self.trust.describe([host for _, host in hosts]),
        }

    def provision(self, lab: str, names: list[str], progress) -> dict:
        hosts = self.hosts()
        if len(hosts) != len(names):
            raise GregorError(
                f"the lab has {len(names)} nodes but {len(hosts)} hosts were given; "
                f"give --nodes {len(hosts)} or name {len(names)} hosts"
            )
        subnet = netns.lab_subnet(lab)
        state = {
            "hosts": [h.to_json() for h in hosts],
            "nodes": [],
            "subnet": str(subnet),
            "bridge_ip": str(next(subnet.hosts())),
            "clients": {},
        }
        progress(
            f"lab {lab}: {len(hosts)} hosts over SSH ({', '.join(h.where() for h in hosts)}); "
            f"host keys {self.trust.describe(hosts)}"
        )
        for name, host in zip(names, hosts):
            conn = self._connection(name, host)
            address, device = self._inspect(lab, name, host, conn)
            twin = next((n["name"] for n in state["nodes"] if n["address"] == address), None)
            if twin:
                raise GregorError(
                    f"{conn.label}: it is the same host as {twin} (address {address}); "
                    "each node needs a host of its own"
                )
            state["nodes"].append(
                {"name": name, "address": address, "device": device, "home": f"{LAB_ROOT}/{lab}/{name}"}
            )
        # What shows later, without a packet, that the machines are still there (stale)
        state["routes"] = ssh_alive.routes(_addresses(state))
        if self.vagrant:
            state["vagrant_dotfile"] = ssh_alive.dotfile(self.vagrant)
        for node in self.nodes(lab, state):
            self._prepare(node)
        return state

    def _inspect(self, lab: str, name: str, host: SshHost, conn: Connection) -> tuple[str, str]:
        """The host's address and interface; one line if it lacks what Gregor needs."""
        probe = SshNode(name, "", "/", lab, host, conn)
        if host.user != "root":
            code, _, _ = conn.run(shlex.join(["sudo", "-n", "true"]))
            if code != 0:
                raise GregorError(
                    f"{probe.label}: {host.user} cannot run commands as root without a password "
                    "(sudo -n); log in as root or allow passwordless sudo there"
                )
        out = probe.exec(["env", f"LAB_ROOT={LAB_ROOT}", "sh", "-c", _PREFLIGHT, "sh", *TOOLS]).stdout.splitlines()
        missing = [line.split()[1] for line in out if line.startswith("missing ")]
        if missing:
            packages = sorted({TOOLS[tool] for tool in missing})
            raise GregorError(
                f"{probe.label}: {', '.join(missing)} not found; install it there "
                f"(Debian: apt-get install {' '.join(packages)}); Gregor's faults and tools need it"
            )
        others = [line.split()[1] for line in out if line.startswith("lab ") and line.split()[1] != lab]
        if others:
            raise GregorError(
                f"{probe.label}: the host still holds lab {others[0]!r} ({LAB_ROOT}/{others[0]}); "
                f"take it down first: gregor lab down --backend ssh --lab {others[0]} --hosts ..."
            )
        address = host.address or _ipv4_of(host, probe.label)
        devices = [line.split()[1] for line in out if line.startswith("addr ") and line.split()[2] == address]
        if not devices:
            raise GregorError(
                f"{probe.label}: no interface there has the address {address}; the node's address "
                "must be the host's own (the one its peers and the clients reach it at)"
            )
        return address, devices[0]

    def _prepare(self, node: SshNode) -> None:
        node.exec(["rm", "-rf", node.home])
        node.exec(["mkdir", "-p", f"{node.home}/tools"])
        if node.host.user != "root":  # SFTP writes as the login user
            node.exec(["chown", "-R", node.host.user, f"{LAB_ROOT}/{node.lab}"])
        node.write_text(f"{node.home}/{DEVICE_FILE}", node.device + "\n")
        for tool in TOOL_FILES:
            node.upload(str(HARNESS_DIR / tool), f"{node.home}/tools/{tool}")
        node.prepare_network()

    def nodes(self, lab: str, state: dict) -> list[SshNode]:
        found = []
        for node, host in zip(state["nodes"], state["hosts"]):
            host = SshHost.from_json(host)
            found.append(
                SshNode(
                    node["name"],
                    node["address"],
                    node["home"],
                    lab,
                    host,
                    self._connection(node["name"], host),
                    node.get("device", "eth0"),
                )
            )
        return found

    def collect(self, lab: str, state: dict, node: SshNode, local_dir: str) -> None:
        node.connection.with_sftp(
            lambda sftp: ssh_files.get_tree(sftp, node.home, local_dir, skip=frozenset({"data", "tools", DEVICE_FILE}))
        )

    def _each_host(self, state: dict | None, script: str, lab: str) -> tuple[dict[str, list[str]], list[str]]:
        """Runs a script of ours as root on every host: ({host label: its
        output lines}, [what kept each unreachable host from answering])."""
        said, unreachable = {}, []
        for name, host in self._state_hosts(state):
            node = SshNode(name or "", "", "/", lab, host, self._connection(name, host))
            try:
                out = node.exec(["sh", "-c", script, "sh", LAB_ROOT, lab], timeout=60).stdout
            except GregorError as error:
                unreachable.append(str(error))
                continue
            said[node.label] = [line.strip() for line in out.splitlines() if line.strip()]
        return said, unreachable

    def stale(self, lab: str, state: dict, local_only: bool = False) -> str | None:
        """Local evidence first (ssh_alive.py): a Vagrant lab's machines run,
        and the routes to the recorded addresses leave where they left at lab
        up. Then one SSH connection to each recorded endpoint, its host key
        checked; it stays open for the nodes. A state file from before routes
        were recorded has none: the connections decide, and the routes are
        recorded then (in `state`, which the caller saves)."""
        hosts = self._state_hosts(state)
        if self.vagrant:
            dotfile = state["vagrant_dotfile"] if "vagrant_dotfile" in state else ssh_alive.dotfile(self.vagrant)
            machines = [host.machine or name or host.host for name, host in hosts]
            why = ssh_alive.vagrant_not_running(self.vagrant, machines, dotfile)
            if why:
                return why
        if "routes" in state:
            why = ssh_alive.moved_routes(state["routes"])
            if why:
                return why
        if local_only:
            return None
        for name, host in hosts:
            try:
                self._connection(name, host).transport()
            except GregorError as error:
                return str(error)
        if "routes" not in state:
            state["routes"] = ssh_alive.routes(_addresses(state))
        return None

    def _no_vagrant_machine_runs(self) -> bool:
        """For a teardown by name: whether the Vagrant lab given has no machine running (destroyed)."""
        try:
            states = ssh_alive.vagrant_states(self.vagrant, ssh_alive.dotfile(self.vagrant))
        except GregorError:
            return False  # vagrant ssh-config then says what is wrong
        return "running" not in states.values()

    def teardown(self, lab: str, state: dict | None, progress, machines_gone: bool = False) -> list[str]:
        """Here the client places and rules; on each host, over SSH, what the
        lab left there; only the former when its machines are gone."""
        if state is None and not self.given():
            raise GregorError(
                f"lab {lab!r} has no state file here; name its hosts: gregor lab down --backend ssh "
                f"--lab {lab} --hosts user@host,... (or --vagrant DIR)"
            )
        if state is None and self.vagrant and self._no_vagrant_machine_runs():
            progress(f"lab {lab}: no machine of the Vagrant lab in {self.vagrant} runs; nothing to clean on them")
            machines_gone = True
        done = []
        spaces = remove_namespaces(lab)  # client places and their bridge, on this host
        if spaces:
            done.append(f"{spaces} client namespaces removed")
        rules = close_gateway(lab)
        if rules:
            done.append(f"{rules} NAT/forwarding rules removed")
        if machines_gone:
            return done
        said, unreachable = self._each_host(state, _TEARDOWN, lab)
        done += [f"{label}: {', '.join(lines)}" for label, lines in said.items() if lines]
        for problem in unreachable:  # said loudly, with how to finish the job later
            done.append(f"NOT cleaned: {problem}")
            progress(
                f"lab {lab}: NOT cleaned, so processes or faults of the lab may remain there: {problem}; "
                f"once it answers: gregor lab down --backend ssh --lab {lab} --hosts ..."
            )
        return done

    def leftovers(self, lab: str) -> list[str]:
        found = [f"namespace {ns}" for ns in netns.namespaces() if ns.startswith(f"{lab}-")]
        found += [f"link {link}" for link in netns.links_with_prefix(f"{lab}-")]
        found += gateway_leftovers(lab)
        if self.given():
            said, unreachable = self._each_host(None, _LEFTOVERS, lab)
            found += [f"{label}: {line}" for label, lines in said.items() for line in lines]
            found += [f"unreachable: {problem}" for problem in unreachable]
        return found

    def busy(self, lab: str) -> bool:
        if any(ns.startswith(f"{lab}-") for ns in netns.namespaces()) or netns.link_exists(netns.bridge_name(lab)):
            return True
        said, _ = self._each_host(None, _LEFTOVERS, lab) if self.given() else ({}, [])
        return any(line.startswith(("dir ", "process ")) for lines in said.values() for line in lines)


def _addresses(state: dict) -> list[str]:
    """Where this host sends the lab's packets: each node's address, and each SSH endpoint."""
    found = [node["address"] for node in state["nodes"]]
    found += [SshHost.from_json(host).host for host in state["hosts"]]
    return list(dict.fromkeys(found))


def _ipv4_of(host: SshHost, label: str) -> str:
    """The IPv4 address `host.host` names (the faults are IPv4 iptables rules)."""
    try:
        infos = socket.getaddrinfo(host.host, host.port, socket.AF_INET, socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise GregorError(
            f"{label}: cannot resolve host name {host.host!r} to an IPv4 address ({error.strerror})"
        ) from None
    return infos[0][4][0]
