"""The table of fault kinds: each one defined here, once.

A fault kind is its name (what `--nemesis` takes and the fault ledger
records), the history `f` of the op that applies it and of the op that
heals it (docs/HISTORY.md), what it acts on, how the report colours its
window, and the nemesis module that applies and heals it. The nemesis, the
heal path after a crash, the checker's fault windows, the report, the
backends and the systems all read this table; nothing else names a fault.

Adding a fault is one entry here plus its module in nemesis/, which offers
`start(nemesis, step, target) -> (ledger entry, history value)` and
`heal(lab, entry) -> dict` (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from dataclasses import dataclass

# The names, for code that must say which fault it means.
PARTITION = "partition"
PAUSE = "pause"
KILL = "kill"
NETEM = "netem"
POWER_LOSS = "power-loss"
LONE_LEADER = "lone-leader"
KILL_CLIENT = "kill-client"
WIRE = "wire"

# What a fault acts on, and so which --nemesis-targets it takes.
NODES = "nodes"  # brokers only
NODES_OR_CLIENTS = "nodes or clients"  # brokers, or the run's own client processes
CLIENTS = "clients"  # the run's client processes only
LEADER = "leader"  # the leader of one partition (leader:KEY targets)


@dataclass(frozen=True)
class FaultKind:
    name: str
    start: str  # history `f` of the op that applies it
    heal: str | None  # history `f` of the op that heals it; None: a moment, nothing to heal
    chart: str = "other"  # the report's colour class for its window: kill, pause, partition, netem, wire, other
    acts_on: str = NODES
    basic: bool = False  # every backend performs it on its nodes with the same tools (iptables, tc, signals)
    needs_peers: bool = False  # cuts a node off from other nodes: meaningless on a one-node cluster
    signals_process: bool = False  # stops or kills the system's own process on the node
    parts: tuple[str, ...] = ()  # made of these faults: whoever takes the parts takes the whole
    module: str | None = None  # the nemesis module that applies and heals it; None: read in histories only


FAULT_KINDS: tuple[FaultKind, ...] = (
    FaultKind(
        PARTITION,
        "start-partition",
        "stop-partition",
        chart="partition",
        acts_on=NODES_OR_CLIENTS,
        basic=True,
        needs_peers=True,
        module="nemesis.partitions",
    ),
    FaultKind(
        PAUSE,
        "pause",
        "resume",
        chart="pause",
        acts_on=NODES_OR_CLIENTS,
        basic=True,
        signals_process=True,
        module="nemesis.pause",
    ),
    FaultKind(KILL, "kill", "start", chart="kill", basic=True, signals_process=True, module="nemesis.kill"),
    FaultKind(NETEM, "start-netem", "stop-netem", chart="netem", basic=True, module="nemesis.netem"),
    FaultKind(POWER_LOSS, "power-off", "power-on", signals_process=True, module="nemesis.power"),
    FaultKind(
        LONE_LEADER,
        "start-lone-leader",
        "stop-lone-leader",
        acts_on=LEADER,
        parts=(PARTITION, KILL),
        module="nemesis.lone_leader",
    ),
    FaultKind(KILL_CLIENT, "kill-client", None, chart="kill", acts_on=CLIENTS, module="nemesis.kill_client"),
    # A rule of the wire relay (harness/wire, docs/WIRE.md) switched on, then off: for one client's
    # requests (a client target), or for the requests a broker sends other brokers (a node target:
    # broker sources, where the backend and the system can put the relay on the nodes).
    FaultKind(WIRE, "start-wire", "stop-wire", chart="wire", acts_on=NODES_OR_CLIENTS, module="nemesis.wire"),
    # Jepsen's clock faults: Gregor never injects them, an imported history may hold them.
    FaultKind("clock", "start-clock", "stop-clock"),
    FaultKind("clock-bump", "bump-clock", "reset-clock"),
)

BY_NAME = {kind.name: kind for kind in FAULT_KINDS}
BY_START = {kind.start: kind for kind in FAULT_KINDS}
# What Gregor can inject, in the table's order (--nemesis).
INJECTABLE = tuple(kind.name for kind in FAULT_KINDS if kind.module)
# The faults a backend may be able to perform on its nodes (Backend.faults);
# power-loss needs nodes that can serve their data from powerfs.
NODE_FAULTS = tuple(kind.name for kind in FAULT_KINDS if kind.basic)
# The `f` of every op that applies a fault Gregor injects.
INJECTED_STARTS = frozenset(kind.start for kind in FAULT_KINDS if kind.module)
# start f -> heal f, for the checker's fault windows.
HEALS = {kind.start: kind.heal for kind in FAULT_KINDS if kind.heal}
HEAL_FS = frozenset(HEALS.values())
# The report's colour of a fault window, by its chart class; the named
# classes are also tried in this order on an unknown `f` (see chart_of).
CHART_COLOURS = {
    "kill": "#e4572e",
    "pause": "#8e6bbf",
    "partition": "#2e86de",
    "netem": "#f0a202",
    "wire": "#16a085",
    "other": "#7f8c8d",
}
CHARTS = tuple(chart for chart in CHART_COLOURS if chart != "other")


def kind(name: str) -> FaultKind:
    """The kind of an injectable fault by its --nemesis name (KeyError: no such fault)."""
    return BY_NAME[name]


def acts_on_clients(name: str) -> bool:
    return BY_NAME[name].acts_on in (NODES_OR_CLIENTS, CLIENTS)


def clients_only(name: str) -> bool:
    return BY_NAME[name].acts_on == CLIENTS


def leader_only(name: str) -> bool:
    return BY_NAME[name].acts_on == LEADER


def with_composites(names) -> frozenset:
    """These faults and every composite fault made only of them."""
    names = frozenset(names)
    return names | {k.name for k in FAULT_KINDS if k.parts and set(k.parts) <= names}


def chart_of(f: str) -> str:
    """The report's colour class of a fault window, from its start `f` (or,
    for a history of another tool, its label): the table's own where it
    knows the `f`, else guessed from the words."""
    found = BY_START.get(f)
    if found is not None:
        return found.chart
    text = (f or "").lower()
    for chart in CHARTS:
        if chart in text:
            return chart
    if "crash" in text or "stop-node" in text:
        return "kill"
    return "other"
