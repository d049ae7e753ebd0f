"""Power cuts: a node's system process dies and its data loses what was never fsynced.

A SIGKILL keeps the page cache: what a broker wrote survives it. A power
cut does not. The lab serves each node's data directory from powerfs
(harness/powerfs.py, `Lab.up(storage="powerfs")`), which knows what every
file held at its last fsync; the cut kills the processes first, all of them
before any storage is touched (a rack losing power loses it at once), then
rolls each node's files back to their fsynced content and unmounts them.
The heal is kill's (kill.start_nodes): Lab.start_node mounts the storage
again before it starts the system.
"""

from __future__ import annotations

import socket

from ground.addresses import split_server
from ground.errors import GregorError
from ground.faults import POWER_LOSS
from nemesis import kill
from nemesis.values import fault_value

# After a power cut of all three brokers, Kafka 3.9.1 recovered every log
# (no clean-shutdown file) and re-elected its metadata quorum before it
# served clients: 14 to 20 s after its process started (2026-11-26). The
# schedule keeps this much room after a power cut's heal.
RESTART_S = 20.0


def require_powerfs(lab) -> None:
    if lab.storage != "powerfs":
        raise GregorError(
            f"lab {lab.name} keeps its data on a plain disk, which cannot lose power; "
            f"bring it up with storage powerfs (gregor lab down --lab {lab.name}, then "
            "gregor lab up --data-on powerfs, or let gregor run bring it up)"
        )


def cut_power(lab, names) -> dict[str, dict]:
    """Kills every named node, then takes their unsynced data; per node, what each file lost."""
    require_powerfs(lab)
    for name in names:
        lab.node(name).kill()
    lost = {}
    for name in names:
        node = lab.node(name)
        report = node.lose_unsynced(lab.data_dir(node))
        lost[name] = {
            "lost_bytes": report["lost_bytes"],
            "files": [
                {"file": f["file"], "lost_bytes": f["lost_bytes"], "size": f["size"], "kept": f["kept"]}
                for f in report["files"]
            ],
        }
    return lost


def lost_fields(lost: dict[str, dict]) -> dict:
    """The history's fields for a cut (docs/HISTORY.md, `power-off`): per node, then in all."""
    return {"lost": lost, "lost_bytes": sum(n["lost_bytes"] for n in lost.values())}


def serving(lab, names) -> bool:
    """Whether every named node accepts connections on its client address
    (a broker that is still recovering its logs refuses them)."""
    for name in names:
        host, port = split_server(lab.system.bootstrap_servers([lab.node(name)]).split(",")[0])
        try:
            with socket.create_connection((host, port), timeout=1):
                pass
        except OSError:
            return False
    return True


# --- the fault (ground/faults.py: power-loss) ------------------------------------

EXTRA_HELD_S = RESTART_S  # after the heal, the brokers recover their logs before they serve
SERVES_LATE = True  # the schedule waits for them to serve again after the heal


def start(nemesis, step, target):
    require_powerfs(nemesis.lab)
    entry = nemesis.ledger.add({"fault": POWER_LOSS, "nodes": list(target.nodes), "role": target.role})
    lost = cut_power(nemesis.lab, target.nodes)
    return entry, fault_value(target.nodes, role=target.role, killed=list(target.nodes), **lost_fields(lost))


def heal(lab, entry: dict) -> dict:
    """kill's heal: Lab.start_node mounts the storage again before it starts the system."""
    return {"started": kill.start_nodes(lab, list(entry.get("nodes", [])))}
