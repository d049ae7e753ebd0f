"""Parses a batch of history lines into Arrow columns, in a Python worker.

The fast load (checkers/fastload.py) parses each file partition with
pyarrow's JSON reader, which is several times faster than Spark's
`from_json` and hands back columns, not rows. It is strict where Spark is
lenient (a number where a string is expected, a blank line), so any line it
cannot take, and any line that breaks a rule of docs/HISTORY.md, makes the
batch *suspect*: the fast load then gives way to checkers/load.py, which
names the bad line. A suspect flag may be raised for a line Spark would
take; it must never be missed for one Spark would reject.

Lines that mention "nemesis" (the nemesis's own events, whose `process` is
a string and whose `value` is any JSON) are few and parsed one by one with
the json module, under the same rules.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from checkers.arrays import NULL, starts
from checkers.history_format import COMMIT, INVOKE, MOP_FS, NEMESIS, POLL, SEND, TYPE_CODES

INVOKE_CODE = 3
TYPE_CODE = dict(TYPE_CODES, **{INVOKE: INVOKE_CODE})

MOP_TYPE = pa.struct(
    [
        ("f", pa.string()),
        ("key", pa.int64()),
        ("value", pa.int64()),
        ("offset", pa.int64()),
        ("poll", pa.int32()),
        ("from", pa.list_(pa.int64())),
    ]
)
REBALANCE_TYPE = pa.struct([("type", pa.string()), ("keys", pa.list_(pa.int64()))])
_FIELDS = [
    ("index", pa.int64()),
    ("time", pa.int64()),
    ("process", pa.int64()),
    ("type", pa.string()),
    ("f", pa.string()),
    ("mops", pa.list_(MOP_TYPE)),
    ("keys", pa.list_(pa.int64())),
    ("error", pa.string()),
    ("group", pa.string()),
    ("rebalance", pa.list_(REBALANCE_TYPE)),
    ("txn_id", pa.string()),
    ("producer_id", pa.int64()),
    ("epoch", pa.int64()),
    ("commit_time", pa.int64()),
    ("auto", pa.bool_()),
]
CLIENT_SCHEMA = pa.schema(_FIELDS)
# What parse() returns: the client schema, `process` as a number (-1 for the
# nemesis), plus whether the line is the nemesis's and its text if so.
EVENT_SCHEMA = pa.schema(_FIELDS + [("nemesis", pa.bool_()), ("text", pa.string())])
_INTEGERS = ("index", "time", "producer_id", "epoch", "commit_time")
_STRINGS = ("type", "f", "error", "group", "txn_id")
_PARSE = pajson.ParseOptions(explicit_schema=CLIENT_SCHEMA, unexpected_field_behavior="ignore")
# What the fast load's first pass reads (checkers/fastload.py's summaries):
# no mops, rebalance, error, commit_time or auto, which are most of the work.
_SUMMARY_FIELDS = ("index", "time", "process", "type", "f", "keys", "group", "txn_id", "producer_id", "epoch")
FIRST_PASS_SCHEMA = pa.schema([field for field in _FIELDS if field[0] in _SUMMARY_FIELDS])
_PARSE_SUMMARY = pajson.ParseOptions(explicit_schema=FIRST_PASS_SCHEMA, unexpected_field_behavior="ignore")
_READ = pajson.ReadOptions(use_threads=False, block_size=1 << 26)
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)


class Suspect(Exception):
    """A line the fast load does not take (the reason is for logs and tests)."""


@dataclass
class Events:
    """One batch of lines as columns, in line order; numbers as int64 with NULL."""

    table: pa.Table
    index: np.ndarray
    time: np.ndarray
    pid: np.ndarray  # -1: the nemesis
    nemesis: np.ndarray
    type: np.ndarray  # TYPE_CODE
    f: pa.Array  # strings
    mops: pa.ListArray

    def __len__(self) -> int:
        return len(self.index)


def ints(array) -> tuple[np.ndarray, np.ndarray]:
    """An integer Arrow array as (int64 values with NULL, null mask)."""
    array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    nulls = array.is_null().to_numpy(zero_copy_only=False)
    values = pc.fill_null(array.cast(pa.int64()), NULL).to_numpy(zero_copy_only=False)
    return values, nulls


def parse(lines: pa.Array, known_keys: np.ndarray, summary_only: bool = False) -> Events:
    """Parses lines (an Arrow string array, no newlines) and checks every
    rule of a single line; raises Suspect for anything it does not take.

    summary_only reads only FIRST_PASS_SCHEMA's fields of client lines (the
    others are null) and checks only what they break: for the first pass,
    whose lines the second pass parses again in full."""
    lines = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    n = len(lines)
    if n == 0:
        return events_of(EVENT_SCHEMA.empty_table())
    if lines.null_count or pc.any(pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(lines)), 0)).as_py():
        raise Suspect("a blank line")
    slow = pc.match_substring(lines, NEMESIS).to_numpy(zero_copy_only=False)
    fast_lines = lines.filter(pa.array(~slow)) if slow.any() else lines
    table = _read_fast(fast_lines, _PARSE_SUMMARY if summary_only else _PARSE)
    table = table.append_column("nemesis", pa.array(np.zeros(len(table), bool))).append_column(
        "text", pa.nulls(len(table), pa.string())
    )
    if summary_only:
        table = pa.Table.from_arrays(
            [
                table.column(f.name) if f.name in table.column_names else pa.nulls(len(table), f.type)
                for f in EVENT_SCHEMA
            ],
            schema=EVENT_SCHEMA,
        )
    if slow.any():
        table = pa.concat_tables([table, _read_slow(lines.filter(pa.array(slow)).to_pylist())])
        where = np.concatenate([np.flatnonzero(~slow), np.flatnonzero(slow)])
        table = table.take(pa.array(np.argsort(where, kind="stable")))
    table = table.combine_chunks()
    events = events_of(table)
    if (events.pid == 0).any() and pc.any(pc.match_substring_regex(lines, r'"process"\s*:\s*-0')).as_py():
        raise Suspect("process -0 (Spark keeps its text)")
    _check_lines(events)
    if not summary_only:
        _check_mops(events.mops, known_keys)
    _check_keys(table, known_keys, summary_only)
    return events


def _read_fast(lines: pa.Array, options: pajson.ParseOptions) -> pa.Table:
    if len(lines) == 0:
        return options.explicit_schema.empty_table()
    offsets = np.frombuffer(
        lines.buffers()[1],
        dtype=np.int64 if pa.types.is_large_string(lines.type) else np.int32,
        count=len(lines) + 1,
        offset=lines.offset * (8 if pa.types.is_large_string(lines.type) else 4),
    )
    data = np.frombuffer(lines.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
    # One buffer, a newline after every line: insert them where each line ends.
    joined = np.insert(data, (offsets[1:] - offsets[0]).astype(np.int64), ord("\n"))
    try:
        table = pajson.read_json(pa.BufferReader(pa.py_buffer(joined)), read_options=_READ, parse_options=options)
    except pa.ArrowInvalid as error:
        raise Suspect(f"pyarrow: {error}") from None
    if len(table) != len(lines):
        raise Suspect("a line pyarrow skipped")
    return table


def _read_slow(texts: list[str]) -> pa.Table:
    rows = []
    for text in texts:
        try:
            event = json.loads(text, object_pairs_hook=_no_duplicates)
        except ValueError:
            raise Suspect("malformed JSON") from None
        if not isinstance(event, dict):
            raise Suspect("not an object")
        row = {}
        for name in _INTEGERS:
            row[name] = _integer(event.get(name))
        process = event.get("process")
        if process == NEMESIS:
            row["process"], row["nemesis"], row["text"] = -1, True, text
        else:
            row["process"], row["nemesis"], row["text"] = _integer(process), False, None
        for name in _STRINGS:
            row[name] = _string(event.get(name), name)
        auto = event.get("auto")
        if auto is not None and type(auto) is not bool:
            raise Suspect("auto not a boolean")
        row["auto"] = auto
        row["keys"] = _integer_list(event.get("keys"))
        row["mops"] = _mops(event.get("mops"))
        row["rebalance"] = _rebalance(event.get("rebalance"))
        rows.append(row)
    try:
        return pa.Table.from_pylist(rows, schema=EVENT_SCHEMA)
    except (pa.ArrowInvalid, OverflowError, TypeError) as error:
        raise Suspect(f"nemesis line: {error}") from None


def _no_duplicates(pairs):
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise Suspect("a field given twice")
    return dict(pairs)


def _integer(value, bounds=_INT64):
    if value is None:
        return None
    if type(value) is not int or not bounds[0] <= value <= bounds[1]:
        raise Suspect("not an integer")
    return value


def _integer_list(value):
    if value is None:
        return None
    if type(value) is not list:
        raise Suspect("not a list")
    return [_integer(v) for v in value]


def _objects(value, what: str) -> list[dict]:
    if type(value) is not list or any(type(item) is not dict for item in value):
        raise Suspect(f"{what} not a list of objects")
    return value


def _string(value, what: str):
    if value is not None and type(value) is not str:
        raise Suspect(f"{what} not a string")
    return value


def _mops(value):
    if value is None:
        return None
    return [
        {
            "f": _string(m.get("f"), "mop f"),
            "key": _integer(m.get("key")),
            "value": _integer(m.get("value")),
            "offset": _integer(m.get("offset")),
            "poll": _integer(m.get("poll"), _INT32),
            "from": _integer_list(m.get("from")),
        }
        for m in _objects(value, "mops")
    ]


def _rebalance(value):
    if value is None:
        return None
    return [
        {"type": _string(r.get("type"), "rebalance type"), "keys": _integer_list(r.get("keys"))}
        for r in _objects(value, "rebalance")
    ]


def events_of(table: pa.Table) -> Events:
    """The columns parse() built, as Events (also for a parse read back from disk)."""
    index, index_null = ints(table.column("index"))
    time, time_null = ints(table.column("time"))
    pid, pid_null = ints(table.column("process"))
    types = table.column("type").combine_chunks()
    code = np.full(len(table), -1, dtype=np.int64)
    for name, value in TYPE_CODE.items():
        code[pc.fill_null(pc.equal(types, name), False).to_numpy(zero_copy_only=False)] = value
    f = table.column("f").combine_chunks()
    if index_null.any() or time_null.any() or pid_null.any() or (code < 0).any() or f.null_count:
        raise Suspect("a missing or unknown index, time, process, type or f")
    nemesis = table.column("nemesis").combine_chunks().to_numpy(zero_copy_only=False)
    if (pid[~nemesis] < 0).any():
        raise Suspect("a negative process (the fast load numbers the nemesis -1)")
    return Events(
        table=table,
        index=index,
        time=time,
        pid=pid,
        nemesis=nemesis,
        type=code,
        f=f,
        mops=table.column("mops").combine_chunks(),
    )


def _check_lines(events: Events) -> None:
    """Indices run one per line (the first one is checked across batches by the caller)."""
    if len(events) and not np.array_equal(events.index, events.index[0] + np.arange(len(events))):
        raise Suspect("indices do not run one per line")


def mop_fields(mops: pa.ListArray) -> dict:
    """The mops of a batch, flattened: `parent` (the line's position), `pos`
    (the mop's position in its list) and each field as ints(...)."""
    flat = pc.list_flatten(mops)
    parent = pc.list_parent_indices(mops).to_numpy(zero_copy_only=False).astype(np.int64)
    n = len(flat)
    first = np.flatnonzero(starts(parent))
    pos = np.arange(n) - np.repeat(first, np.diff(np.r_[first, n])) if n else np.empty(0, np.int64)
    out = {"parent": parent, "pos": pos, "n": n, "flat": flat, "f": flat.field("f") if n else pa.array([], pa.string())}
    for name in ("key", "value", "offset", "poll"):
        out[name] = ints(flat.field(name)) if n else (np.empty(0, np.int64), np.empty(0, bool))
    source = flat.field("from") if n else pa.array([], pa.list_(pa.int64()))
    length = pc.list_value_length(source)
    out["from_n"] = pc.fill_null(length, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    pair = pc.equal(pc.fill_null(length, 0), 2).to_numpy(zero_copy_only=False)
    out["from_has_null"] = bool(n and pc.list_flatten(source).null_count)
    for name, at in (("from_key", 0), ("from_value", 1)):
        values = np.full(n, NULL, dtype=np.int64)
        if pair.any():
            pairs = source.filter(pa.array(pair))
            values[pair] = ints(pc.list_element(pairs, at))[0]
        out[name] = values
    return out


def _check_mops(mops: pa.ListArray, known_keys: np.ndarray) -> None:
    m = mop_fields(mops)
    if m["n"] == 0:
        return
    if m["flat"].null_count:
        raise Suspect("a null mop")
    f = m["f"]
    is_send = pc.fill_null(pc.equal(f, SEND), False).to_numpy(zero_copy_only=False)
    is_poll = pc.fill_null(pc.equal(f, POLL), False).to_numpy(zero_copy_only=False)
    is_commit = pc.fill_null(pc.equal(f, COMMIT), False).to_numpy(zero_copy_only=False)
    assert set(MOP_FS) == {SEND, POLL, COMMIT}
    key_null, value_null, offset_null = m["key"][1], m["value"][1], m["offset"][1]
    bad = ~(is_send | is_poll | is_commit)
    bad |= is_send & (key_null | value_null)
    bad |= is_poll & ~key_null & (value_null | offset_null)
    bad |= is_commit & (key_null | offset_null)
    bad |= (m["from_n"] >= 0) & (m["from_n"] != 2)
    bad |= ~key_null & ~np.isin(m["key"][0], known_keys)
    if bad.any() or m["from_has_null"]:
        raise Suspect("a mop that breaks a rule, or names an unknown key")


def _check_keys(table: pa.Table, known_keys: np.ndarray, keys_only: bool = False) -> None:
    """`keys` (and, unless keys_only, every rebalance entry's keys) name known keys."""
    checked = [pc.list_flatten(table.column("keys").combine_chunks())]
    if not keys_only:
        rebalance = pc.list_flatten(table.column("rebalance").combine_chunks())
        if rebalance.null_count:
            raise Suspect("a null rebalance entry")
        if len(rebalance) and rebalance.field("keys").null_count:
            raise Suspect("a rebalance entry without keys")
        checked.append(pc.list_flatten(rebalance.field("keys")) if len(rebalance) else pa.array([], pa.int64()))
    for values in checked:
        if values.null_count or not np.isin(values.to_numpy(zero_copy_only=False), known_keys).all():
            raise Suspect("a null or unknown key")
