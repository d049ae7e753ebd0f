"""One fault as a pair of history operations: apply it, then heal it.

Each start is an `invoke` saying what the schedule asked for, then an
`info` completion saying what was actually done (resolved roles, nodes,
grudges); the heal is another such pair. The ledger entry is written before
the fault touches anything.

Every value follows one schema (docs/HISTORY.md): `nodes`, the node names
the fault acts on or heals (a list, maybe empty), and `clients`, the history
process ids of the clients it acts on, where it acts on clients; the rest
(shape, grudge, role, profile, ...) describes the fault.
"""

from __future__ import annotations

import random
import threading
import time

from ground.procfs import identity
from nemesis import kill, netem, partitions, pause, power
from nemesis.heal import heal_entry
from nemesis.ledger import Ledger
from nemesis.schedule import Step
from nemesis.targets import Target, TargetResolver, TargetUnavailable

START_F = {
    "partition": "start-partition",
    "pause": "pause",
    "kill": "kill",
    "netem": "start-netem",
    "power-loss": "power-off",
    "lone-leader": "start-lone-leader",
    "kill-client": "kill-client",
}
STOP_F = {
    "partition": "stop-partition",
    "pause": "resume",
    "kill": "start",
    "netem": "stop-netem",
    "power-loss": "power-on",
    "lone-leader": "stop-lone-leader",
}
LONE_LEADER_WRITES_S = 3.0  # acknowledged writes on the lone leader before it is killed
LONE_LEADER_WAIT_S = 25.0  # at most this long for the ISR to shrink (replica.lag.time.max.ms and more)


def fault_value(nodes, clients=(), **fields) -> dict:
    """A nemesis value in the history's schema: nodes (and clients) first."""
    value: dict = {"nodes": list(nodes)}
    if clients:
        value["clients"] = list(clients)
    value.update(fields)
    return value


class Nemesis:
    """Applies steps to the lab and records them through ctx.record."""

    def __init__(self, ctx, ledger: Ledger, rng: random.Random):
        self.ctx = ctx
        self.lab = ctx.lab
        self.ledger = ledger
        self.rng = rng
        self.resolver = TargetResolver(ctx.lab, ctx, rng)
        self.op_lock = getattr(ctx, "nemesis_op", None) or threading.Lock()

    def _record(self, type_: str, f: str, value: dict, error: str | None = None) -> dict:
        event = {"process": "nemesis", "type": type_, "f": f, "value": value}
        if error:
            event["error"] = error
        return self.ctx.record(event)

    def start(self, step: Step) -> dict | None:
        """Applies one step; returns its ledger entry (to heal later), or
        None when nothing was applied (the role did not exist)."""
        f = START_F[step.fault]
        self.resolver.wait_for(step.target)
        with self.op_lock:
            return self._start(step, f)

    def _start(self, step: Step, f: str) -> dict | None:
        self._record("invoke", f, fault_value([], **step.intent()))
        entry = None
        try:
            target = self.resolver.resolve(step.target, need_place=(step.fault == "partition"))
            entry, value = getattr(self, "_" + step.fault.replace("-", "_"))(step, target)
        except TargetUnavailable as why:
            self._record("info", f, fault_value([], skipped=str(why), target=step.target))
            return None
        except Exception as error:
            # partly applied: the entry is in the ledger and gets healed
            self._record(
                "info",
                f,
                fault_value((entry or {}).get("nodes", []), failed=str(error), target=step.target),
                error=type(error).__name__,
            )
            return entry
        self._record("info", f, value)
        return entry

    def stop(self, entry: dict) -> dict:
        """Heals one applied fault and records it."""
        with self.op_lock:
            return self._stop(entry)

    def _stop(self, entry: dict) -> dict:
        f = STOP_F[entry["fault"]]
        clients = [c["process"] for c in entry.get("clients", []) if "process" in c]
        self._record("invoke", f, fault_value(entry.get("nodes", []), clients, role=entry.get("role")))
        try:
            done = heal_entry(self.lab, entry)
        except Exception as error:
            self._record(
                "info", f, fault_value(entry.get("nodes", []), clients, failed=str(error)), error=type(error).__name__
            )
            raise
        self.ledger.remove(entry["id"])
        value = fault_value(entry.get("nodes", []), clients, **done)
        self._record("info", f, value)
        return value

    # --- one method per fault: ledger first, then the fault ----------------

    def _partition(self, step: Step, target: Target):
        names = [n.name for n in self.lab.nodes]
        shape = step.shape or "isolate"
        if shape.startswith("client"):
            client = target.clients[0]
            place = self.lab.client_place(client.place)
            direction = partitions.CLIENT_CUTS[shape]
            entry = self.ledger.add(
                {
                    "fault": "partition",
                    "nodes": [],
                    "places": [place.name],
                    "clients": [{"process": client.process}],
                    "role": target.role,
                }
            )
            addresses = self.lab.client_addresses()
            partitions.cut_client(self.lab, place, addresses, direction)
            value = fault_value(
                [],
                [client.process],
                role=target.role,
                shape=shape,
                client_address=place.address,
                cut_from=names or addresses,
                direction=direction,
            )
            return entry, value
        part = self._shape(shape, names, target)
        entry = self.ledger.add({"fault": "partition", "nodes": part.nodes(), "role": target.role})
        partitions.apply_grudge(self.lab, part.grudge)
        return entry, fault_value(part.nodes(), **part.value(), role=target.role)

    def _shape(self, shape: str, names: list[str], target: Target) -> partitions.Partition:
        if shape == "isolate":
            return partitions.isolate(names, target.nodes[0])
        if shape in ("one-way-in", "one-way-out"):
            victim = target.nodes[0]
            others = [n for n in names if n != victim]
            if shape == "one-way-in":  # the victim hears nobody, is heard by all
                return partitions.one_way(names, others, [victim])
            return partitions.one_way(names, [victim], others)
        if shape == "majority-minority":
            chosen = list(target.nodes)
            minority = chosen if 2 * len(chosen) < len(names) else [n for n in names if n not in chosen]
            return partitions.majority_minority(names, minority)
        if shape == "halves":
            return partitions.random_halves(names, self.rng)
        if shape == "bridge":
            return partitions.bridge(names, self.rng)
        if shape == "ring":
            return partitions.majorities_ring(names, self.rng)
        raise ValueError(f"unknown partition shape {shape!r}")

    def _pause(self, step: Step, target: Target):
        idents = [dict(i, process=c.process) for c in target.clients if (i := identity(c.pid)) is not None]
        if target.clients and not idents:
            raise TargetUnavailable("the client process exited before it could be paused")
        entry = self.ledger.add({"fault": "pause", "nodes": list(target.nodes), "clients": idents, "role": target.role})
        paused = pause.pause_nodes(self.lab, target.nodes)
        fields = {"role": target.role, "paused": paused}
        if idents:
            done = [i for i in idents if pause.pause_client(i)]
            fields["paused_clients"] = [i["process"] for i in done]
            fields["client_pids"] = [i["pid"] for i in done]
        return entry, fault_value(target.nodes, [i["process"] for i in idents], **fields)

    def _kill(self, step: Step, target: Target):
        entry = self.ledger.add({"fault": "kill", "nodes": list(target.nodes), "role": target.role})
        return entry, fault_value(target.nodes, role=target.role, killed=kill.kill_nodes(self.lab, target.nodes))

    def _kill_client(self, step: Step, target: Target):
        """SIGKILL of a client process, which the run replaces at once by a new
        process (old id + concurrency): nothing is left to heal, so nothing goes
        in the ledger and the returned entry is `instant` (never held)."""
        replace = getattr(self.ctx, "kill_client", None)
        if replace is None:
            raise TargetUnavailable("this run cannot kill and replace clients")
        client = target.clients[0]
        try:
            old, new = replace(client.process)
        except LookupError as why:
            raise TargetUnavailable(str(why)) from None
        entry = {"id": f"kill-client-{old}", "fault": "kill-client", "nodes": [], "instant": True}
        return entry, fault_value([], [old], role=target.role, killed=[old], replaced_by=new)

    def _lone_leader(self, step: Step, target: Target):
        """The ISR shrinks to the leader alone, then the leader dies.

        The other nodes' packets to the leader's client port (where followers
        fetch) are dropped, while the controller quorum and the clients still
        reach it; once the cluster reports the leader as the only in-sync
        replica (or after LONE_LEADER_WAIT_S) the leader takes writes alone
        for LONE_LEADER_WRITES_S, then dies, and the fault is held. It dies
        by a power cut when the lab keeps its data on powerfs (what it never
        fsynced is gone too, as after a real one), else by SIGKILL (its page
        cache survives)."""
        leader = target.nodes[0]
        key = target.role.split(":", 1)[1]
        topic, partition = self.ctx.test["keys"][key]
        others = [n.name for n in self.lab.nodes if n.name != leader]
        node = self.lab.node(leader)
        port = node.service.ports[0]
        entry = self.ledger.add({"fault": "lone-leader", "nodes": [leader], "role": target.role})
        node.drop_from([self.lab.node(n).address for n in others], port=port)
        started = time.monotonic()
        isr = self._wait_lone(topic, int(partition), leader, started + LONE_LEADER_WAIT_S)
        shrunk_s = round(time.monotonic() - started, 3)
        time.sleep(LONE_LEADER_WRITES_S)
        if self.lab.storage == "powerfs":
            end = {"death": "power-loss", "killed": [leader], **power.lost_fields(power.cut_power(self.lab, [leader]))}
        else:
            end = {"death": "kill", "killed": kill.kill_nodes(self.lab, [leader])}
        return entry, fault_value(
            [leader],
            role=target.role,
            cut_from=others,
            port=port,
            isr=isr,
            isr_alone=isr == [leader],
            waited_s=shrunk_s,
            **end,
        )

    def _wait_lone(self, topic: str, partition: int, leader: str, until: float) -> list[str]:
        """The partition's ISR (node names) once it is the leader alone, or at `until`."""
        isr: list[str] = []
        while True:
            try:
                found = self.lab.admin(timeout=5).partitions(topic).get(partition, {})
                isr = sorted(self.lab.system.node_of(b) for b in found.get("isr", []))
            except Exception:  # noqa: BLE001 - an answer may fail while the cluster reshuffles
                pass
            if isr == [leader] or time.monotonic() >= until:
                return isr
            time.sleep(0.5)

    def _power_loss(self, step: Step, target: Target):
        power.require_powerfs(self.lab)
        entry = self.ledger.add({"fault": "power-loss", "nodes": list(target.nodes), "role": target.role})
        lost = power.cut_power(self.lab, target.nodes)
        return entry, fault_value(target.nodes, role=target.role, killed=list(target.nodes), **power.lost_fields(lost))

    def _netem(self, step: Step, target: Target):
        profile = netem.PROFILES[step.profile or "delay"]
        entry = self.ledger.add({"fault": "netem", "nodes": list(target.nodes), "role": target.role})
        applied_by = netem.apply(self.lab, target.nodes, profile)
        return entry, fault_value(target.nodes, role=target.role, **profile.value(), applied_by=applied_by)
