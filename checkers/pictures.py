"""results.json `partitions`: the log of each key an anomaly names, offset by offset.

The per-key pass, in its `picture` mode, rebuilds the log of the named keys
only and sends back a bounded slice around the anomalies (MAX_OFFSETS per
key), so the report can draw the partition.
"""

from __future__ import annotations

import numpy as np

from checkers import passes
from checkers.keypass import STATUS_ORDER, Params
from checkers.load import Tables

MAX_OFFSETS = 2000
MARGIN = 50


def partitions(t: Tables, named: dict, max_offsets: int = MAX_OFFSETS) -> dict:
    """Per key named by an anomaly: topic, partition, truncated, offsets[{offset, index, values, status}]."""
    if not named:
        return {}
    keys = sorted(named)
    with_offset = [(k, o) for k, o in sorted(named.items()) if o is not None]
    params = Params(
        mode="picture",
        read_txns=passes.main_params(t).read_txns,
        picture_keys=np.array(keys, dtype=np.int64),
        named_keys=np.array([k for k, _ in with_offset], dtype=np.int64),
        named_offsets=np.array([o for _, o in with_offset], dtype=np.int64),
        max_offsets=max_offsets,
        margin=MARGIN,
    )
    rows = passes.key_pass(t, params, keys).select("key", "offset", "value", "a", "b", "c").collect()
    totals = {r["key"]: r["b"] for r in rows if r["a"] == -1}
    offsets: dict = {}
    for r in rows:
        if r["a"] == -1:
            continue
        entry = offsets.setdefault((r["key"], r["offset"]), {"index": r["a"], "values": set(), "rank": None, "dup": 0})
        entry["values"].add(r["value"])
        entry["rank"] = r["b"] if entry["rank"] is None else min(entry["rank"], r["b"])
        entry["dup"] = max(entry["dup"], r["c"])
    result: dict = {}
    for (key, offset), entry in sorted(offsets.items(), key=lambda item: (item[0][0], item[1]["index"])):
        topic, partition = (t.test["keys"].get(str(key)) or [None, None])[:2]
        picture = result.setdefault(
            str(key), {"topic": topic, "partition": partition, "truncated": False, "offsets": []}
        )
        values = sorted(entry["values"])
        if len(values) > 1:
            status = "inconsistent"
        elif entry["dup"]:
            status = "duplicate"
        else:
            status = STATUS_ORDER[entry["rank"]] if entry["rank"] is not None else "unacked"
        picture["offsets"].append({"offset": offset, "index": entry["index"], "values": values, "status": status})
    for key, picture in result.items():
        picture["truncated"] = len(picture["offsets"]) < totals.get(int(key), 0)
    return result
