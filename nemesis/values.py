"""The value of a nemesis op in the history (docs/HISTORY.md).

Every value follows one schema: `nodes`, the node names the fault acts on
or heals (a list, maybe empty), and `clients`, the history process ids of
the clients it acts on, where it acts on clients; the rest (shape, grudge,
role, profile, ...) describes the fault.
"""

from __future__ import annotations


def fault_value(nodes, clients=(), **fields) -> dict:
    """A nemesis value in the history's schema: nodes (and clients) first."""
    value: dict = {"nodes": list(nodes)}
    if clients:
        value["clients"] = list(clients)
    value.update(fields)
    return value
