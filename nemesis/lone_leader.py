"""The lone leader (ground/faults.py: lone-leader): the ISR shrinks to the
leader alone, then the leader dies.

The other nodes' packets to the leader's client port (where followers
fetch) are dropped, while the controller quorum and the clients still reach
it; once the cluster reports the leader as the only in-sync replica (or
after WAIT_S) the leader takes writes alone for WRITES_S, then dies, and the
fault is held. It dies by a power cut when the lab keeps its data on powerfs
(what it never fsynced is gone too, as after a real one), else by SIGKILL
(its page cache survives).
"""

from __future__ import annotations

import time

from ground.faults import KILL, LONE_LEADER, POWER_LOSS
from nemesis import kill, power
from nemesis.values import fault_value

WRITES_S = 3.0  # acknowledged writes on the lone leader before it is killed
WAIT_S = 25.0  # at most this long for the ISR to shrink (replica.lag.time.max.ms and more)
EXTRA_HELD_S = WAIT_S + WRITES_S  # the ISR shrinks and the leader writes before the kill is held


def start(nemesis, step, target):
    lab = nemesis.lab
    leader = target.nodes[0]
    key = target.role.split(":", 1)[1]
    topic, partition = nemesis.ctx.test["keys"][key]
    others = [n.name for n in lab.nodes if n.name != leader]
    node = lab.node(leader)
    port = node.service.ports[0]
    entry = nemesis.ledger.add({"fault": LONE_LEADER, "nodes": [leader], "role": target.role})
    node.drop_from([lab.node(n).address for n in others], port=port)
    started = time.monotonic()
    isr = _wait_lone(lab, topic, int(partition), leader, started + WAIT_S)
    shrunk_s = round(time.monotonic() - started, 3)
    time.sleep(WRITES_S)
    if lab.storage == "powerfs":
        end = {"death": POWER_LOSS, "killed": [leader], **power.lost_fields(power.cut_power(lab, [leader]))}
    else:
        end = {"death": KILL, "killed": kill.kill_nodes(lab, [leader])}
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


def _wait_lone(lab, topic: str, partition: int, leader: str, until: float) -> list[str]:
    """The partition's ISR (node names) once it is the leader alone, or at `until`."""
    isr: list[str] = []
    while True:
        try:
            found = lab.admin(timeout=5).partitions(topic).get(partition, {})
            isr = sorted(lab.system.node_of(b) for b in found.get("isr", []))
        except Exception:  # noqa: BLE001 - an answer may fail while the cluster reshuffles
            pass
        if isr == [leader] or time.monotonic() >= until:
            return isr
        time.sleep(0.5)


def heal(lab, entry: dict) -> dict:
    nodes = list(entry.get("nodes", []))
    for name in nodes:
        lab.node(name).heal_network()
    return {"healed": nodes, "started": kill.start_nodes(lab, nodes)}
