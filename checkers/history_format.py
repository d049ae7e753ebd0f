"""Names and codes of the history format (docs/HISTORY.md) that the checkers share.

The strings are part of the recorded format: a history written by any tool
uses them, so they live here and not in the harness that happens to write
them today. The integer codes are the checkers' own: the per-key pass works
on numeric columns only.
"""

from __future__ import annotations

# Event and op outcomes; an invoke without a completion counts as INFO.
INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
TYPES = (INVOKE, OK, FAIL, INFO)
TYPE_CODES = {OK: 0, FAIL: 1, INFO: 2}

# Micro-operation kinds.
SEND, POLL, COMMIT = "send", "poll", "commit"
MOP_FS = (SEND, POLL, COMMIT)

# Op kinds the checkers look at by name.
TXN, INIT, ASSIGN, SUBSCRIBE = "txn", "init", "assign", "subscribe"
RESETS = (ASSIGN, SUBSCRIBE)
NEMESIS = "nemesis"

# Values of a nemesis event's `applied_by` (one per node) for netem faults.
NETEM_QDISC = "tc netem qdisc"
NETEM_EMULATED = "userspace emulation (NFQUEUE)"

# Nemesis `value` fields with a fixed meaning: `nodes` (node names the fault
# acts on or heals) and `clients` (history process ids it targets).
NODES, CLIENTS = "nodes", "clients"
# Before `nodes` was fixed, these fields named the nodes of one action.
LEGACY_NODE_FIELDS = ("isolated", "healed", "killed", "started", "paused", "resumed", "cleared")
