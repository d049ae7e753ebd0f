"""The per-key pass over a key too large to hold at once (issue 42).

A task runs the pass on whole keys (passes.streamed_key_chunks). A key
with more rows than LARGE_KEY_ROWS is instead written to local files as
its rows come, and run in pieces of a few hundred thousand rows:

- V: all rows of some values (a hash of the value cuts them; a
  copier-input marker goes with its input's value). Most steps are about
  one value: duplicates, lost and unseen, the aborted, uncommitted and
  precommitted reads, offset-commit loss, the follow-ups, liveness, lag,
  the wr edges and the cover.
- P: stretches of the key's rows in process order (they come sorted by
  key, process, op and mop), each with the few rows of the stretch before
  that an order step pairs with (KeyPass's `carried`): poll and send order.
- X: the rows at offsets that hold two values (inconsistent offsets).
- C: the key's writers and the reads of ops that also write: the chain of
  writers and the compressed graph's junctions.

What a piece needs of the whole key (KeyFacts: its record offsets, which
values an `ok` op read, each value's first offset, the read bound, the
groups' commits, the processes' read times) comes from a first sweep over
the V pieces: a few bytes a value. The rows are the pass's over the whole
key, once the per-key rows the V pieces give in parts (cover, lag and the
eos counts) are merged.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from checkers.arrays import NULL, fill_backward_after, fill_forward, first_per_group, group_ids, join, member, order
from checkers.keypass import (
    COVER,
    EOS_COUNT,
    LAG,
    PICTURE,
    S_CWW,
    S_WW,
    WR,
    WW,
    KeyFacts,
    KeyPass,
    Params,
    Rows,
    add_edges,
    add_spans,
)
from checkers.table_format import FROM_ROW, REBALANCE_ROW

# A key with more rows than this is run in pieces (issue 42: one key of the
# 10M long-transaction history has 7.8M rows, and the pass held about 276
# bytes a row of it, some 2 GB, in each of two workers). Run whole, a key of
# this many rows takes about 550 MB; in pieces, a key of 7.5M rows took at
# most 431 MB, but twice the time, so keys below this stay whole (the 10M
# eos history's keys have 1.2M rows each).
LARGE_KEY_ROWS = 1 << 21
# V pieces per large key: a key of 7.8M rows gives pieces of about 120,000.
BUCKETS = 64
# Rows in a stretch of process order, and positions in a range of the chain.
STRETCH_ROWS = 1 << 17


@dataclass(frozen=True)
class Sizes:
    """The sizes above as the driver has them, for its tasks (a test sets them there)."""

    large: int
    buckets: int
    stretch: int


def sizes() -> Sizes:
    return Sizes(LARGE_KEY_ROWS, BUCKETS, STRETCH_ROWS)


# Rows gathered before they are cut into the pieces' files.
_CUT_ROWS = 1 << 18
_ORDINAL = "_ordinal"  # a row's place in the key's rows as they came
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def value_buckets(c: dict, buckets: int) -> np.ndarray:
    """Each row's V piece: a hash of its value (of its input's, for a
    copier-input marker). Rows without a value all go to one piece."""
    value = np.where(c["kind"] == FROM_ROW, c["from_value"], c["value"])
    return ((value.view(np.uint64) * _GOLDEN) % np.uint64(buckets)).astype(np.int64)


class Spill:
    """A large key's rows in local files: as they came (the P stretches),
    and by V piece, each row with its ordinal."""

    def __init__(self, buckets: int = BUCKETS, directory: str | None = None):
        self.dir = Path(tempfile.mkdtemp(prefix="gregor-key-", dir=directory or _local_dir()))
        self.buckets = buckets
        self.rows = 0
        self._writers: dict[str, pa.ipc.RecordBatchStreamWriter] = {}
        self._held: list[dict] = []  # segments not yet cut by piece
        self._held_rows = 0

    def add(self, segment: dict[str, np.ndarray]):
        """A segment of the key's rows, in the order they come. The rows are
        cut into pieces _CUT_ROWS at a time: a Spark batch (10,000 rows) at
        a time, writing the files of a key of 7.5M rows took 2.8 s, not 1.9."""
        n = len(segment["key"])
        if not n:
            return
        self._held.append(segment)
        self._held_rows += n
        if self._held_rows >= _CUT_ROWS:
            self._cut()

    def _cut(self):
        if not self._held:
            return
        rows = joined(self._held)
        self._held_rows = 0
        self.write("stream", rows)
        n = len(rows["key"])
        rows[_ORDINAL] = np.arange(self.rows, self.rows + n, dtype=np.int64)
        self.rows += n
        bucket = value_buckets(rows, self.buckets)
        perm = np.argsort(bucket, kind="stable")
        bucket = bucket[perm]
        bounds = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1], True])
        for name in list(rows):
            rows[name] = rows[name][perm]
        for low, high in zip(bounds[:-1], bounds[1:]):
            self.write(f"v{int(bucket[low])}", {name: values[low:high] for name, values in rows.items()})

    def write(self, name: str, columns: dict[str, np.ndarray]):
        """Rows to the named file, after those written before."""
        batch = pa.RecordBatch.from_arrays([pa.array(v) for v in columns.values()], names=list(columns))
        writer = self._writers.get(name)
        if writer is None:
            writer = self._writers[name] = pa.ipc.new_stream(str(self.dir / name), batch.schema)
        writer.write_batch(batch)

    def close(self):
        """Every row written; the files can be read."""
        self._cut()
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()

    def pieces(self):
        """The V pieces' rows, one piece at a time (empty ones left out)."""
        for b in range(self.buckets):
            if (self.dir / f"v{b}").exists():
                yield self.read(f"v{b}")

    def batches(self, name: str):
        """A file's batches as numpy columns, one at a time."""
        path = self.dir / name
        if not path.exists():
            return
        with pa.OSFile(str(path)) as source:
            for batch in pa.ipc.open_stream(source):
                yield {
                    n: np.array(batch.column(n).to_numpy(zero_copy_only=False), copy=True) for n in batch.schema.names
                }

    def read(self, name: str) -> dict[str, np.ndarray] | None:
        """A whole file's rows (None when there are none)."""
        parts = list(self.batches(name))
        return joined(parts) if parts else None

    def remove(self):
        for writer in self._writers.values():
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - a file being removed
                pass
        self._writers.clear()
        shutil.rmtree(self.dir, ignore_errors=True)


def give_back_memory():
    """Returns freed memory to the system between a large key's stages: its
    pieces are many arrays of about a megabyte, below glibc's mmap threshold,
    and the heap they leave keeps its pages (about 240 MB after the facts'
    sweep of a 7.5M-row key) until trimmed."""
    pa.default_memory_pool().release_unused()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _libc():
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc
        return None


_LIBC = _libc()


def _local_dir() -> str | None:
    """Spark's own local directory for this worker (SPARK_LOCAL_DIRS, which
    Spark removes when its session ends, so a killed task leaves no files
    behind), else the system's temporary directory."""
    dirs = [d for d in os.environ.get("SPARK_LOCAL_DIRS", "").split(",") if d and os.path.isdir(d)]
    return dirs[0] if dirs else None


def joined(parts: list[dict]) -> dict[str, np.ndarray]:
    """One array per column of the parts (dicts of the same columns, in
    order), the parts' list emptied as it goes: each part's column goes
    once it is copied, so the rows are not held twice."""
    names = list(parts[0])
    out = {}
    for name in names:
        out[name] = np.concatenate([p.pop(name) for p in parts])
    parts.clear()
    return out


def _rows(c: dict, rows: np.ndarray, names=None) -> dict[str, np.ndarray]:
    return {name: c[name][rows] for name in (names or c)}


# ---------------------------------------------------------------- the key's facts


class _FactSweep:
    """KeyFacts gathered over the V pieces, each piece's KeyPass in turn.
    A value's rows are all in one piece, so the pieces' values are distinct."""

    def __init__(self, times: bool):
        self.times = times
        self.offsets, self.bad = [], []  # distinct record offsets per piece; offsets with two values in one
        self.values, self.value_offsets, self.value_read = [], [], []
        self.local_txns = np.empty(0, dtype=np.int64)
        self.bound_offset, self.bound_op = NULL, NULL
        self.commits = []
        self.read_times: dict[int, list] = {}

    def add(self, kp: KeyPass):
        c = kp.c
        rec_offset, rec_value = c["offset"][kp.ri], c["value"][kp.ri]
        ids, n = group_ids(rec_offset, rec_value)
        pair_offsets = rec_offset[first_per_group(ids, n)]  # sorted, one per distinct (offset, value)
        del ids, rec_offset, rec_value
        distinct = np.r_[True, pair_offsets[1:] != pair_offsets[:-1]] if n else np.empty(0, bool)
        self.offsets.append(pair_offsets[distinct])
        self.bad.append(pair_offsets[~distinct])
        logged = kp.position != NULL  # the value has a record
        self.values.append(kp.kv_values()[logged])
        self.value_offsets.append(kp.log_offset[logged])
        self.value_read.append(kp.read_kv[logged].astype(np.int8))
        self.local_txns = np.union1d(self.local_txns, np.unique(c["op"][kp.send & kp.info & kp.txn & kp.read]))
        reads = np.flatnonzero(kp.okread)
        if len(reads):
            top = int(c["offset"][reads].max())
            op = int(c["op"][reads][c["offset"][reads] == top].min())
            if (
                self.bound_offset == NULL
                or top > self.bound_offset
                or (top == self.bound_offset and op < self.bound_op)
            ):
                self.bound_offset, self.bound_op = top, op
            if self.times:
                pid, done = c["pid"][reads], c["complete_time"][reads]
                for process in np.unique(pid):
                    # liveness asks only for the last read before a time: each time once (a poll's reads share one)
                    self.read_times.setdefault(int(process), []).append(np.unique(done[pid == process]))
        g, _k, committed, op, time = kp._committed()
        if len(g):
            self.commits.append((g, committed, op, time))

    def facts(self) -> tuple[KeyFacts, np.ndarray]:
        """The key's facts, and the offsets that hold two or more values
        (each list is emptied as it is joined: the facts' peak is about twice their size)."""
        every = _popped(self.offsets)
        every.sort()
        # A value's rows are all in one piece: an offset in two pieces holds two values.
        twice = every[1:][every[1:] == every[:-1]]
        bad = np.unique(np.concatenate([twice, *self.bad]))
        offsets = every[np.r_[True, every[1:] != every[:-1]]] if len(every) else every
        del every, twice
        values = _popped(self.values)
        perm = np.argsort(values)
        values = values[perm]
        value_offsets = _popped(self.value_offsets)[perm]
        value_read = _popped(self.value_read, np.int8)[perm]
        del perm
        read_times = {}
        for process, parts in self.read_times.items():
            read_times[process] = np.unique(_popped(parts))
        return (
            KeyFacts(
                offsets=offsets,
                values=values,
                value_offsets=value_offsets,
                value_read=value_read,
                bound_offset=self.bound_offset,
                bound_op=self.bound_op,
                read_txns=self.local_txns,
                committed=_best_commits(self.commits),
                read_times=read_times,
            ),
            bad,
        )


def _popped(parts: list, dtype=np.int64) -> np.ndarray:
    """The parts joined into one array, the list emptied."""
    out = np.concatenate(parts) if parts else np.empty(0, dtype)
    parts.clear()
    return out


def _best_commits(commits: list[tuple]) -> tuple:
    """Per group, the commit `KeyPass._committed` picks: the highest offset, then the first op."""
    if not commits:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty, empty
    g, committed, op, time = (np.concatenate(column) for column in zip(*commits))
    ids, n = group_ids(g)
    best = first_per_group(ids, n, -committed, op)
    return g[best], committed[best], op[best], time[best]


def key_facts(spill: Spill, params: Params) -> tuple[KeyFacts, np.ndarray]:
    """The large key's facts from one sweep over its V pieces. A piece
    tells which `info` transactions had a send read among its values; one
    read in a piece and not among the run's (params.read_txns) makes its
    sends in other pieces must-have-happened, so the sweep runs again."""
    read_txns = params.read_txns
    while True:
        sweep = _FactSweep(times=params.timeout is not None)
        for piece in spill.pieces():
            sweep.add(KeyPass(piece, replace(params, read_txns=read_txns)))
        new = np.setdiff1d(sweep.local_txns, read_txns)
        if not len(new):
            return sweep.facts()
        read_txns = np.union1d(read_txns, new)


# ---------------------------------------------------------------- the pieces


_MERGED = (COVER, LAG, EOS_COUNT)


def large_key_parts(spill: Spill, params: Params, most: int = STRETCH_ROWS):
    """The pass's parts (as KeyPass.run gives them) over the key in
    `spill`, in stretches and chain ranges of about `most` rows."""
    spill.close()
    facts, bad = key_facts(spill, params)
    give_back_memory()
    if params.mode == "picture":
        yield from _picture(spill, params, facts)
        return
    # the chain's ranges of positions, about `most` positions each
    ranges = max(1, -(-len(facts.offsets) // most))
    width = max(1, -(-len(facts.offsets) // ranges))
    key = None
    merged = []
    for piece in spill.pieces():
        key = int(piece["key"][0])
        kp = KeyPass(piece, params, facts)
        for part in kp.run(frozenset("V")).parts:
            if part["tag"][0] in _MERGED:
                merged.append(part)
            else:
                yield part
        if len(bad):
            at = kp.ri[member(piece["offset"][kp.ri], bad)]
            if len(at):
                spill.write("x", _rows(piece, at))
        for name, rows in zip("wj", kp.chain_inputs()):
            _write_ranges(spill, name, rows, width)
        del kp, piece
    yield from _merge(merged)
    give_back_memory()
    yield from _stretches(spill, params, facts, most)
    give_back_memory()
    spill.close()
    rows = spill.read("x")
    if rows is not None:
        perm = np.argsort(rows.pop(_ORDINAL), kind="stable")
        rows = {name: values[perm] for name, values in rows.items()}
        yield from KeyPass(rows, params, facts).run(frozenset("X")).parts
        del rows
    yield from chain_parts(spill, params, key, ranges)


def _picture(spill: Spill, params: Params, facts: KeyFacts):
    """The picture mode's rows of a large key: each piece's offsets near the
    named ones, and the key's count of offsets, from its facts."""
    key = None
    for piece in spill.pieces():
        key = int(piece["key"][0])
        yield from KeyPass(piece, params, facts).run(frozenset("V")).parts
    if key is not None and len(facts.offsets) and key in set(params.picture_keys.tolist()):
        out = Rows()
        out.add(PICTURE, 1, key=[key], a=[-1], b=[len(facts.offsets)])
        yield from out.parts


def _merge(parts: list[dict]):
    """The per-key rows the V pieces gave in parts, as the whole key's pass gives them."""
    by_tag: dict[int, list[dict]] = {}
    for part in parts:
        by_tag.setdefault(int(part["tag"][0]), []).append(part)
    if COVER in by_tag:
        covers = by_tag[COVER]
        words = covers[0]["lists"]["values"][1].copy()
        for part in covers[1:]:
            words |= part["lists"]["values"][1]
        yield {**covers[0], "lists": {"values": (covers[0]["lists"]["values"][0], words)}}
    if LAG in by_tag:
        lags = by_tag[LAG]
        bucket = np.concatenate([p["a"] for p in lags])
        worst = np.concatenate([p["b"] for p in lags])
        ids, n = group_ids(bucket)
        top = first_per_group(ids, n, -worst)
        yield {**lags[0], "n": n, **_one_per(lags[0], n), "a": bucket[top], "b": worst[top]}
    if EOS_COUNT in by_tag:
        counts = by_tag[EOS_COUNT]
        total = {name: np.array([sum(int(p[name][0]) for p in counts)]) for name in ("a", "b", "c")}
        yield {**counts[0], **total}


def _one_per(part: dict, n: int) -> dict:
    """A part's columns other than a and b, for n rows of one key."""
    return {
        "tag": np.full(n, part["tag"][0], dtype=np.int32),
        **{name: np.full(n, part[name][0], dtype=np.int64) for name in ("key", "value", "offset", "time", "c", "d")},
    }


def _stretches(spill: Spill, params: Params, facts: KeyFacts, most: int):
    """The order steps over the key's rows in process order, `most` rows at
    a time, cut between ops; each stretch after the first begins with the
    rows of the one before that its first pairs need."""
    carry, held, held_rows, last = None, [], 0, None
    for batch in spill.batches("stream"):
        at = (batch["pid"], batch["op"], batch["mop_index"])
        if not _sorted(*at) or (last is not None and tuple(int(a[0]) for a in at) < last):
            raise RuntimeError("a large key's rows came out of process order (passes.key_pass sorts them)")
        last = tuple(int(a[-1]) for a in at)
        held.append(batch)
        held_rows += len(batch["pid"])
        if held_rows < most:
            continue
        rows = joined(held)
        cut = _last_op_start(rows)
        if cut == 0:  # one op so far: wait for the next
            held, held_rows = [rows], len(rows["pid"])
            continue
        tail = {name: values[cut:] for name, values in rows.items()}
        head = {name: values[:cut] for name, values in rows.items()}
        del rows
        carry = yield from _stretch(head, carry, params, facts)
        del head
        held, held_rows = [tail], len(tail["pid"])
    if held:
        yield from _stretch(joined(held), carry, params, facts)


def _sorted(pid, op, mop) -> bool:
    """Whether the rows are in (pid, op, mop) order."""
    up = lambda column: column[1:] > column[:-1]  # noqa: E731
    same = lambda column: column[1:] == column[:-1]  # noqa: E731
    return bool(np.all(up(pid) | (same(pid) & (up(op) | (same(op) & (mop[1:] >= mop[:-1]))))))


def _last_op_start(rows: dict) -> int:
    """Where the last (process, op) of the rows begins."""
    pid, op = rows["pid"], rows["op"]
    differ = np.flatnonzero((pid != pid[-1]) | (op != op[-1]))
    return int(differ[-1] + 1) if len(differ) else 0


def _stretch(rows: dict, carry: dict | None, params: Params, facts: KeyFacts):
    """One stretch's order steps; returns the rows the next stretch carries."""
    carried = 0 if carry is None else len(carry["key"])
    if carried:
        rows = {name: np.concatenate([carry[name], rows[name]]) for name in rows}
    kp = KeyPass(rows, params, facts, carried=carried)
    yield from kp.run(frozenset("P")).parts
    return _rows(rows, _carried_rows(kp))


def _carried_rows(kp: KeyPass) -> np.ndarray:
    """The rows of the stretch's last process that the next stretch's
    first pairs may need: its last `ok` read with the rebalance markers
    from that read's op on, its last placed send that must have happened,
    and its last such `ok` one."""
    c = kp.c
    mine = c["pid"] == c["pid"][-1]
    keep = []
    reads = np.flatnonzero(mine & kp.okread)
    if len(reads):
        last = reads[-1]
        keep.append([last])
        keep.append(np.flatnonzero(mine & (c["kind"] == REBALANCE_ROW) & (c["op"] >= c["op"][last])))
    placed_index, _offset = kp.placed()
    sends = np.flatnonzero(mine & kp.must & (placed_index != NULL))
    if len(sends):
        keep.append(sends[-1:])
        ok = sends[kp.ok[sends]]
        keep.append(ok[-1:])
    return np.unique(np.concatenate([np.asarray(k, dtype=np.int64) for k in keep])) if keep else np.empty(0, np.int64)


# ---------------------------------------------------------------- the chain of writers


def _write_ranges(spill: Spill, name: str, rows: dict, width: int):
    """A piece's chain inputs, to the files of their ranges of positions."""
    if not len(rows["pos"]):
        return
    r = rows["pos"] // width
    perm = np.argsort(r, kind="stable")
    r = r[perm]
    bounds = np.flatnonzero(np.r_[True, r[1:] != r[:-1], True])
    for low, high in zip(bounds[:-1], bounds[1:]):
        spill.write(f"{name}{int(r[low])}", {column: values[perm[low:high]] for column, values in rows.items()})


def _range(spill: Spill, r: int) -> tuple[dict | None, dict | None]:
    """A range's writers, in chain order (position, then node), and its junction reads."""
    w = spill.read(f"w{r}")
    if w is not None:
        perm = order(w["pos"], w["node"])
        w = {name: values[perm] for name, values in w.items()}
    return w, spill.read(f"j{r}")


def _fill(values, present, carry, carried: bool, forward: bool) -> np.ndarray:
    """fill_forward (or fill_backward_after) over one range, with the entry
    the ranges before (after) carry, when they carry one, put first (last)."""
    start = np.zeros(len(values) + 1, dtype=bool)
    start[0] = True
    if forward:
        return fill_forward(np.r_[carry, values], np.r_[carried, present], start)[1:]
    return fill_backward_after(np.r_[values, carry], np.r_[present, carried], start)[:-1]


def chain_parts(spill: Spill, params: Params, key: int, ranges: int):
    """The edges of a large key's chain of writers, as KeyPass._graph makes
    them over the whole chain, one range of positions at a time: the ww
    edges and each writer's junction as the chain runs forward, each
    junction's next one running back, and the junctions' reads forward
    again. What crosses ranges is the chain's last entry and last (or next)
    junction."""
    out = Rows()
    owners0, junctions = [], []
    last, last_phi, owner = NULL, NULL, NULL
    for r in range(ranges):  # forward: ww edges, the first owners
        w, _j = _range(spill, r)
        if w is None:
            owners0.append(None)
            continue
        node, phi = w["node"], w["phi"]
        src, src_phi = (np.r_[last, node[:-1]], np.r_[last_phi, phi[:-1]]) if last != NULL else (node[:-1], phi[:-1])
        dst, dst_phi = (node, phi) if last != NULL else (node[1:], phi[1:])
        _emit(out, params, (src, dst, WW, key, src_phi, dst_phi), S_WW)
        owners0.append(_fill(node, w["junction"] == 1, owner, owner != NULL, forward=True))
        owner = owners0[-1][-1]
        last, last_phi = node[-1], phi[-1]
        yield from _drain(out)
    next0, next_final, next_phi = NULL, NULL, NULL
    for r in reversed(range(ranges)):  # back: the junctions, each one's next
        w, j = _range(spill, r)
        if w is None:
            junctions.append(None)
            continue
        node, phi, junction0, owner0 = w["node"], w["phi"], w["junction"] == 1, owners0[r]
        next_j0 = _fill(node, junction0, next0, next0 != NULL, forward=False)
        read = np.zeros(len(node), dtype=bool)
        if j is not None:
            ids, _ = group_ids(np.r_[w["value"], j["value"]], np.r_[owner0, j["node"]])
            read = member(ids[: len(node)], ids[len(node) :])
        junction = junction0 | ((owner0 != NULL) & ((owner0 == next_j0) | read))
        next_j = _fill(node, junction, next_final, next_final != NULL, forward=False)
        next_j_phi = _fill(phi, junction, next_phi, next_final != NULL, forward=False)
        has = junction & (next_j != NULL)
        _emit(out, params, (node[has], next_j[has], WW, key, phi[has], next_j_phi[has]), S_CWW)
        junctions.append(junction)
        if junction0.any():
            next0 = node[np.argmax(junction0)]
        if junction.any():
            first = np.argmax(junction)
            next_final, next_phi = node[first], phi[first]
        yield from _drain(out)
    junctions.reverse()
    del owners0
    owner, owner_phi = NULL, NULL
    for r in range(ranges):  # forward: each junction's reads
        w, j = _range(spill, r)
        if w is None:
            continue
        node, phi, junction = w["node"], w["phi"], junctions[r]
        owners = _fill(node, junction, owner, owner != NULL, forward=True)
        phis = _fill(phi, junction, owner_phi, owner != NULL, forward=True)
        owner, owner_phi = owners[-1], phis[-1]
        if j is None:
            continue
        owned = owners != NULL
        oi, rj = join(w["value"][owned], j["value"])
        o_owner, o_node, o_phi = owners[owned][oi], node[owned][oi], phis[owned][oi]
        kinds = np.where(o_owner == o_node, WR, WW | WR)
        _emit(out, params, (o_owner, j["node"][rj], kinds, key, o_phi, j["phi"][rj]), None)
        yield from _drain(out)


def _emit(out: Rows, params: Params, part: tuple, component: int | None):
    """A part of the chain's edges as the mode's rows: SPAN rows (main) or EDGE rows (cycles)."""
    n = len(part[0])
    part = tuple(np.full(n, value, dtype=np.int64) if np.isscalar(value) else value for value in part)
    if params.mode == "main":
        add_spans(out, part, component)
    else:
        add_edges(out, params.intervals, part, compressed=component != S_WW)


def _drain(out: Rows):
    yield from out.parts
    out.parts.clear()
