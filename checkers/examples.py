"""Which anomalies a check shows as examples, chosen where they are found.

results.json shows, per anomaly name, its count and its first few
instances in `example_key` order (earliest first). The main pass's
partitions each hold whole keys, so each partition can count its own
anomalies, keep its own first few of each name, and name the lowest offset
any anomaly names on each of its keys (`partition_summary`). The driver
then merges a few rows per partition (`merge_summaries`) instead of Spark
ranking every anomaly row in a window, which took a shuffle and three more
jobs per check.
"""

from __future__ import annotations

import numpy as np

from checkers.arrays import NULL

_LATEST = np.iinfo(np.int64).max


def example_key(row: dict) -> tuple:
    """The order examples are chosen in: time ascending with nulls last, then
    key, value, offset, offsets, values and ops ascending with nulls first
    (lists compare element by element, a prefix first), as Spark orders them."""

    def asc(value):
        return (value is not None, value if value is not None else 0)

    return (
        (row.get("time") is None, row.get("time") or 0),
        asc(row.get("key")),
        asc(row.get("value")),
        asc(row.get("offset")),
        asc(row.get("offsets")),
        asc(row.get("values")),
        asc(row.get("ops")),
    )


def named_offsets(rows, named: dict | None = None) -> dict:
    """key -> the lowest offset anomaly rows name on it (None when they name
    the key only); folded into `named` when given, which is updated and returned."""
    named = {} if named is None else named
    for row in rows:
        key = row["key"]
        if key is None:
            continue
        offsets = [o for o in [row["offset"], *(row["offsets"] or [])] if o is not None]
        low = min(offsets) if offsets else None
        current = named.get(key, low)
        named[key] = low if current is None else (current if low is None else min(current, low))
    return named


def partition_summary(parts: list[dict], keep: int, tags: tuple[int, int, int]) -> list[dict]:
    """Rows parts (checkers/keypass.Rows) summing up the anomaly parts given:
    per name a count (tag `tally`, in column a) and its first `keep` rows in
    `example_key` order (tag `example`, copies of the anomaly rows), and per
    key an anomaly row names its lowest offset named (tag `named`, offset
    NULL when none of them names one)."""
    example, tally, named = tags
    by_name: dict[str, list[dict]] = {}
    for part in parts:
        by_name.setdefault(part["name"], []).append(part)
    out = []
    for name, group in by_name.items():
        out.append(_part(tally, [sum(p["n"] for p in group)], name))
        for part, rows in _first(group, keep):
            out.append(_take(part, rows, example))
    out.extend(_named(parts, named))
    return out


def _first(group: list[dict], keep: int) -> list[tuple[dict, np.ndarray]]:
    """The `keep` first rows of a name's parts in example_key order, as
    (part, row indices): sorted on the scalar columns first, then the rows
    tied with the last one kept by every column, lists included."""
    which = np.concatenate([np.full(p["n"], i, np.int64) for i, p in enumerate(group)])
    rows = np.concatenate([np.arange(p["n"], dtype=np.int64) for p in group])
    scalars = [np.concatenate([p[c] for p in group]) for c in ("time", "key", "value", "offset")]
    scalars[0] = np.where(scalars[0] == NULL, _LATEST, scalars[0])
    ordered = np.lexsort(scalars[::-1])
    if len(ordered) > keep:
        last = ordered[keep - 1]
        tied = np.logical_and.reduce([column[ordered[keep:]] == column[last] for column in scalars])
        ordered = np.concatenate([ordered[:keep], ordered[keep:][tied]])
    candidates = sorted(ordered.tolist(), key=lambda i: example_key(part_row(group[which[i]], int(rows[i]))))[:keep]
    chosen = []
    for i, part in enumerate(group):
        mine = sorted(int(rows[c]) for c in candidates if which[c] == i)
        if mine:
            chosen.append((part, np.array(mine, dtype=np.int64)))
    return chosen


def part_row(part: dict, i: int, scalars: tuple[str, ...] = ("time", "key", "value", "offset")) -> dict:
    """Row i of a part, as the driver would see it (None for NULL): these
    scalar columns and the list columns."""
    row = {c: (None if part[c][i] == NULL else int(part[c][i])) for c in scalars}
    for column in ("offsets", "values", "ops"):
        if column in part["lists"]:
            offsets, flat = part["lists"][column]
            row[column] = flat[offsets[i] : offsets[i + 1]].tolist()
        else:
            row[column] = None
    return row


def _take(part: dict, rows: np.ndarray, tag: int) -> dict:
    """Those rows of a part, under another tag."""
    taken = {"tag": np.full(len(rows), tag, dtype=np.int32), "name": part["name"], "n": len(rows), "lists": {}}
    for column, values in part.items():
        if isinstance(values, np.ndarray) and column != "tag":
            taken[column] = values[rows]
    for column, (offsets, flat) in part["lists"].items():
        lengths = offsets[rows + 1] - offsets[rows]
        new_offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=new_offsets[1:])
        pieces = [flat[offsets[r] : offsets[r + 1]] for r in rows]
        taken["lists"][column] = (new_offsets, np.concatenate(pieces) if pieces else flat[:0])
    return taken


def _named(parts: list[dict], tag: int) -> list[dict]:
    """Per key of an anomaly row, the lowest of its rows' offsets and offset
    lists (Spark's min of least(offset, array_min(offsets)): NULLs skipped)."""
    keys, lows = [], []
    for part in parts:
        low = part["offset"].copy()
        if "offsets" in part["lists"]:
            offsets, flat = part["lists"]["offsets"]
            nonempty = np.flatnonzero(offsets[1:] > offsets[:-1])
            if len(nonempty):
                first = np.full(part["n"], NULL, dtype=np.int64)
                first[nonempty] = np.minimum.reduceat(flat[: offsets[-1]], offsets[nonempty])
                low = np.where(low == NULL, first, np.where(first == NULL, low, np.minimum(low, first)))
        has_key = part["key"] != NULL
        keys.append(part["key"][has_key])
        lows.append(low[has_key])
    if not keys or not sum(len(k) for k in keys):
        return []
    key, low = np.concatenate(keys), np.concatenate(lows)
    distinct, owner = np.unique(key, return_inverse=True)
    lowest = np.full(len(distinct), _LATEST, dtype=np.int64)
    named = low != NULL
    np.minimum.at(lowest, owner[named], low[named])
    lowest[lowest == _LATEST] = NULL
    return [_part(tag, np.full(len(distinct), NULL, dtype=np.int64), None, key=distinct, offset=lowest)]


def _part(tag: int, a, name: str | None, **columns) -> dict:
    n = len(a)
    part = {"tag": np.full(n, tag, dtype=np.int32), "name": name, "n": n, "lists": {}}
    for column in ("key", "value", "offset", "time", "b", "c", "d"):
        part[column] = np.asarray(columns[column], np.int64) if column in columns else np.full(n, NULL, np.int64)
    part["a"] = np.asarray(a, np.int64)
    return part


def merge_summaries(tallies: list[dict], examples: list[dict], named: list[dict], keep: int) -> tuple[dict, dict, dict]:
    """The partitions' summary rows (dicts) merged: (counts by name, the
    first `keep` examples by name in example_key order, key -> the lowest
    offset named on it or None, as named_offsets of the named rows)."""
    counts: dict = {}
    for row in tallies:
        counts[row["name"]] = counts.get(row["name"], 0) + row["a"]
    chosen: dict = {}
    for row in examples:
        chosen.setdefault(row["name"], []).append(row)
    chosen = {name: sorted(rows, key=example_key)[:keep] for name, rows in chosen.items()}
    return counts, chosen, named_offsets(named)
