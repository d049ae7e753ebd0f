"""The per-key pass: everything docs/ANOMALIES.md defines on one partition, at once.

Input: numpy columns of the rows of some keys (sends, polls, commits and the
rebalance and copier markers routed to those keys), each row carrying the
facts of its op. Output: rows of a few tagged kinds (anomalies, and small
facts that other finders join on). Every step is vectorised over all keys
of the batch: sorts, ranks and equi-joins of id columns, never a Python
loop per row, so one pass costs a few sorts of the key's rows.

Readings (docs/ANOMALIES.md):
- The log of a key: every polled record (any outcome) and every send that
  must have happened whose offset is known; offsets compacted to dense
  indices. A value's position is its first index.
- A read sits at the index of the offset it was read at. A send sits at the
  index of its own offset when the acknowledgement carried one, else at the
  position where the log shows its value (positions come from the log, not
  from acknowledgements alone).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from checkers.arrays import (
    NULL,
    bitmaps,
    covered,
    dense_rank_within,
    fill_backward_after,
    fill_forward,
    find,
    first_per_group,
    group_ids,
    join,
    lists,
    meets,
    member,
    order,
    previous_in_group,
    reduce_by,
    search,
    starts,
)
from checkers.table_format import COMMIT_ROW, FAIL_CODE, FROM_ROW, INFO_CODE, OK_CODE, POLL_ROW, REBALANCE_ROW, SEND_ROW

# Output row tags.
(
    ANOMALY,
    SPAN,
    TORN,
    ZOMBIE_SEND,
    EOS_OUT,
    EOS_REC,
    EOS_POS,
    INFO_NODE,
    LATE,
    LAG,
    EDGE,
    NODE,
    LOG,
    POSITION,
    MUST,
    BOUND,
    PICTURE,
    COVER,
    ROUTE,
    EXAMPLE,
    TALLY,
    NAMED,
    EOS_UNPROVEN,
    EOS_INFO_OUT,
    EOS_COUNT,
) = range(25)

# A pictured offset's statuses (checkers/pictures.py), worst first: an
# offset shows the most serious status of its values.
STATUS_ORDER = ["inconsistent", "duplicate", "aborted", "lost", "unseen", "unacked", "acked-unread", "read"]

# Cycle graph: node = op * NODE_SHIFT + sub (0: the whole op, i+1: its send mop i).
NODE_SHIFT = 1 << 20
WW, WR, PROC, RT = 1, 2, 4, 8
HUB = 16
NO_TIME = 1 << 62
# Span components: uncompressed ww and wr edges, compressed (junction) ww and wr edges.
S_WW, S_WR, S_CWW, S_CWR = 0, 1, 2, 3
# Interval sets of the cycle pass, by the edges they cover.
I_CWR, I_C, I_WR, I_ALL = 0, 1, 2, 3

INPUT_COLUMNS = (
    "key",
    "kind",
    "op",
    "mop_index",
    "pid",
    "is_txn",
    "tcode",
    "value",
    "offset",
    "from_key",
    "from_value",
    "invoke_time",
    "complete_time",
    "commit_time",
    "group",
    "seg",
    "n_sends",
    "n_send_keys",
    "reads",
)


@dataclass
class Params:
    """What one run of the pass needs besides the rows (all small)."""

    mode: str = "main"  # main | cycles | facts | picture
    read_txns: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # info txn ops with a read send
    fenced: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # zombie candidates' ops
    copier_groups: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    read_uncommitted: bool = False  # consumers read uncommitted records: a read proves no transaction committed
    drain_complete: bool = False
    timeout: int | None = None  # stuck-lso: ns, when read_committed with a timeout
    lag_bucket: int | None = None  # ns
    intervals: dict = field(default_factory=dict)  # cycle pass: I_* -> (lo, hi) sorted disjoint
    wide: tuple | None = None  # cycle pass: the widest interval set of the process order, (lo, hi)
    cover: tuple | None = None  # main pass: (origin, width, bins) of the keys' cover bitmaps
    examples: int = 0  # main pass: first examples kept per anomaly name (checkers/examples.py)
    picture_keys: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    named_keys: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # (key, offset) an anomaly names
    named_offsets: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    max_offsets: int = 2000
    margin: int = 50


@dataclass
class KeyFacts:
    """What the pieces of one large key (checkers/pieces.py) need to know of
    the whole key, a few bytes a value at most: where its records stand,
    which values an `ok` op read and where each first stands, its read
    bound, the groups' committed offsets, and each process's `ok` read times."""

    offsets: np.ndarray  # sorted distinct offsets of the key's records
    values: np.ndarray  # sorted values the log holds
    value_offsets: np.ndarray  # each one's first offset
    value_read: np.ndarray  # whether an `ok` poll read it (int8)
    bound_offset: int  # offset of the highest `ok` read, NULL when none
    bound_op: int  # the first op that read there, NULL when none
    read_txns: np.ndarray  # `info` transactions with a send read on the key
    committed: tuple  # per group: (group, offset, op, complete_time) of its best `ok` commit
    read_times: dict  # process -> sorted distinct completions of its `ok` reads (liveness only)


# Which steps of the main and cycle modes run on which piece of a large key
# (checkers/pieces.py): all rows of some values (V), a stretch of the rows
# in process order (P), the rows at offsets holding two values (X), or
# the key's writers and the reads of junction ops (C). Without pieces, all.
ALL_FAMILIES = frozenset("VPXC")


class Rows:
    """Collects output rows per tag as column arrays, turned into one table at the end."""

    COLUMNS = ("key", "value", "offset", "time", "a", "b", "c", "d")

    def __init__(self):
        self.parts: list[dict] = []

    def add(self, tag: int, n: int, name: str | None = None, lists_: dict | None = None, **columns):
        if n == 0:
            return
        part = {"tag": np.full(n, tag, dtype=np.int32), "name": name, "n": n, "lists": lists_ or {}}
        for column in self.COLUMNS:
            value = columns.get(column)
            part[column] = np.full(n, NULL, dtype=np.int64) if value is None else np.asarray(value, dtype=np.int64)
        self.parts.append(part)


def _time(c, rows: np.ndarray) -> np.ndarray:
    """When the ops of these rows happened: their completion, or their invoke when cut short.
    Asked for a few rows at a time: a column of every row's time lived through the whole pass."""
    complete = c["complete_time"][rows]
    return np.where(complete != NULL, complete, c["invoke_time"][rows])


def _pairs_list(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A list column [first, second] per row."""
    n = len(first)
    offsets = np.arange(0, 2 * n + 1, 2, dtype=np.int64)
    flat = np.empty(2 * n, dtype=np.int64)
    flat[0::2], flat[1::2] = first, second
    return offsets, flat


def _distinct_pairs_list(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[first, second], or [first] when both are equal (array_distinct of two)."""
    n = len(first)
    both = first != second
    counts = np.where(both, 2, 1)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    flat = np.empty(int(offsets[-1]), dtype=np.int64)
    flat[offsets[:-1]] = first
    flat[offsets[:-1][both] + 1] = second[both]
    return offsets, flat


def _compact_distinct_list(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """array_distinct(array_compact([first, second])): NULL entries left out."""
    n = len(first)
    has_first, has_second = first != NULL, (second != NULL) & (second != first)
    counts = has_first.astype(np.int64) + has_second
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    flat = np.empty(int(offsets[-1]), dtype=np.int64)
    flat[offsets[:-1][has_first]] = first[has_first]
    second_at = offsets[:-1] + has_first
    flat[second_at[has_second]] = second[has_second]
    return offsets, flat


def _single_list(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(len(values) + 1, dtype=np.int64), values.astype(np.int64)


class KeyPass:
    """One run of the pass over the rows of a batch of keys."""

    def __init__(self, c: dict, p: Params, facts: KeyFacts | None = None, carried: int = 0):
        """`facts`: the whole key's, when `c` is a piece of one key; `carried`:
        how many leading rows are an earlier stretch's, there only as the
        previous row of an order step (no pair ends at one)."""
        self.c, self.p, self.key_facts, self.carried = c, p, facts, carried
        self.kv_value = None  # kv_values(), made when asked
        self.out = Rows()
        n = len(c["key"])
        self.n = n
        kind, tcode = c["kind"], c["tcode"]
        self.send = kind == SEND_ROW
        self.poll = kind == POLL_ROW
        self.commit = kind == COMMIT_ROW
        self.ok = tcode == OK_CODE
        self.fail = tcode == FAIL_CODE
        self.info = tcode == INFO_CODE
        self.okread = self.poll & self.ok
        self.txn = c["is_txn"] == 1
        self._kv()
        self._must()
        self._log()

    # ------------------------------------------------------------ shared facts

    def _kv(self):
        """Dense ids of (key, value) over sends and polls; which of them an `ok` op read."""
        c = self.c
        sp = np.flatnonzero(self.send | self.poll)
        self.kv = np.full(self.n, -1, dtype=np.int64)
        ids, self.n_kv = group_ids(c["key"][sp], c["value"][sp])
        self.kv[sp] = ids
        if self.key_facts is None:
            self.read_kv = np.zeros(self.n_kv, dtype=bool)
            self.read_kv[self.kv[self.okread]] = True
        else:
            f = self.key_facts
            # where each value stands among the key's logged values, and whether it is one
            self.at, self.logged = find(f.values, self.kv_values())
            self.read_kv = self.logged & (f.value_read[self.at] != 0) if len(f.values) else self.logged
        self.read = np.zeros(self.n, dtype=bool)
        self.read[self.send] = self.read_kv[self.kv[self.send]]

    def kv_values(self) -> np.ndarray:
        """The value of each (key, value) id (of one key's rows: the value names it)."""
        if self.kv_value is None:
            sp = np.flatnonzero(self.send | self.poll)
            self.kv_value = np.empty(self.n_kv, dtype=np.int64)
            self.kv_value[self.kv[sp]] = self.c["value"][sp]
        return self.kv_value

    def kv_of(self, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
        """The (key, value) id of each pair, -1 when no send or poll has it."""
        c = self.c
        sp = np.flatnonzero(self.send | self.poll)
        ids, n = group_ids(np.concatenate([keys, c["key"][sp]]), np.concatenate([values, c["value"][sp]]))
        id_to_kv = np.full(n, -1, dtype=np.int64)
        id_to_kv[ids[len(keys) :]] = self.kv[sp]
        return id_to_kv[ids[: len(keys)]]

    def _must(self):
        """Sends that must have happened: `ok`; `info` and read; every send of
        an `info` transaction of which one send was read (here or on any key)."""
        c = self.c
        op = c["op"]
        local = np.unique(op[self.send & self.info & self.txn & self.read])
        txns_read = np.union1d(local, self.p.read_txns)
        if self.key_facts is not None:
            txns_read = np.union1d(txns_read, self.key_facts.read_txns)
        self.must = self.send & (self.ok | (self.info & self.read) | (self.info & self.txn & member(op, txns_read)))

    def _log(self):
        """Index of every record's offset; first index and offset of every value."""
        c = self.c
        has_offset = c["offset"] != NULL
        self.record = self.poll | (self.must & has_offset)
        ri = np.flatnonzero(self.record)
        self.ri = ri
        self.index = np.full(self.n, NULL, dtype=np.int64)
        if self.key_facts is not None:
            self._log_of_key(ri)
            return
        self.index[ri] = dense_rank_within(c["key"][ri], c["offset"][ri])
        self.position = reduce_by(self.kv[ri], self.n_kv, self.index[ri], np.minimum, np.iinfo(np.int64).max)
        self.position[self.position == np.iinfo(np.int64).max] = NULL
        self.log_offset = reduce_by(self.kv[ri], self.n_kv, c["offset"][ri], np.minimum, np.iinfo(np.int64).max)
        self.log_offset[self.log_offset == np.iinfo(np.int64).max] = NULL
        self.kid, self.n_keys = group_ids(c["key"])
        bound = np.full(self.n_keys, -1, dtype=np.int64)
        rr = np.flatnonzero(self.okread)
        if len(rr):
            np.maximum.at(bound, self.kid[rr], self.index[rr])
        self.bound = bound
        at_bound = rr[self.index[rr] == bound[self.kid[rr]]]
        bound_op = np.full(self.n_keys, np.iinfo(np.int64).max, dtype=np.int64)
        if len(at_bound):
            np.minimum.at(bound_op, self.kid[at_bound], c["op"][at_bound])
        bound_op[bound < 0] = NULL
        self.bound_op = bound_op

    def _log_of_key(self, ri: np.ndarray):
        """`_log` of a piece of one key, from the whole key's facts: an
        index is a rank among the key's record offsets, a value's first
        offset is the key's, and the bound is the key's."""
        c, f = self.c, self.key_facts
        if self.n and c["key"].min() != c["key"].max():
            raise ValueError("a piece of a large key holds rows of two keys")
        self.index[ri] = search(f.offsets, c["offset"][ri])
        logged = self.logged
        self.log_offset = np.where(logged, f.value_offsets[self.at] if len(f.values) else NULL, NULL)
        self.position = np.where(logged, search(f.offsets, self.log_offset), NULL)
        self.kid, self.n_keys = np.zeros(self.n, dtype=np.int64), 1
        has_bound = f.bound_offset != NULL
        self.bound = np.array([np.searchsorted(f.offsets, f.bound_offset) if has_bound else -1], dtype=np.int64)
        self.bound_op = np.array([f.bound_op if has_bound else NULL], dtype=np.int64)

    # ------------------------------------------------------------ main mode

    def run(self, families: frozenset = ALL_FAMILIES) -> Rows:
        """The mode's steps, those of `families` only (see ALL_FAMILIES)."""
        mode = self.p.mode
        if mode == "main":
            if "X" in families:
                self.inconsistent_offsets()
            if "V" in families:
                self.duplicates()
                self.lost_and_unseen()
                self.aborted_reads()
                self.uncommitted_reads()
                self.precommitted_reads()
            if "P" in families:
                self.poll_order()
                self.send_order()
            if "V" in families:
                self.offset_commit_loss()
                self.follow_ups()
                self.liveness()
                self.lag()
            self.cycles(spans_only=True, parts=_graph_parts(families))
            if "V" in families:
                self.cover()
        elif mode == "cycles":
            self.cycles(spans_only=False, parts=_graph_parts(families))
            if "V" in families:
                self.routes()
        elif mode == "facts":
            self.facts()
        elif mode == "picture" and "V" in families:
            self.picture()
        return self.out

    def inconsistent_offsets(self):
        """One offset of a key holding two or more values."""
        c, ri = self.c, self.ri
        key, offset, value = c["key"][ri], c["offset"][ri], c["value"][ri]
        ko, n_ko = group_ids(key, offset)
        kov, n_kov = group_ids(key, offset, value)
        first_triple = first_per_group(kov, n_kov)
        values_per_ko = np.bincount(ko[first_triple], minlength=n_ko)
        bad = values_per_ko >= 2
        if not bad.any():
            return
        rows = np.flatnonzero(bad[ko])
        bad_ids, owner = np.unique(ko[rows], return_inverse=True)
        n_bad = len(bad_ids)
        first = rows[first_per_group(owner, n_bad)]
        times = reduce_by(owner, n_bad, _time(c, ri[rows]), np.minimum, np.iinfo(np.int64).max)
        self.out.add(
            ANOMALY,
            n_bad,
            "inconsistent-offsets",
            lists_={"values": lists(owner, value[rows], n_bad), "ops": lists(owner, c["op"][ri][rows], n_bad)},
            key=key[first],
            offset=offset[first],
            time=times,
        )

    def _duplicated(self):
        """Rows of the log's records whose value stands at two or more offsets, and
        per such row its duplicated value's id (0..n-1); the values' kv ids."""
        c, ri = self.c, self.ri
        kv = self.kv[ri]
        kvo, n_kvo = group_ids(kv, c["offset"][ri])
        first_pair = first_per_group(kvo, n_kvo)
        offsets_per_kv = np.bincount(kv[first_pair], minlength=self.n_kv)
        bad = offsets_per_kv >= 2
        rows = np.flatnonzero(bad[kv])
        bad_ids, owner = np.unique(kv[rows], return_inverse=True)
        return rows, owner, bad_ids

    def duplicates(self):
        """One value standing at two or more offsets of its key."""
        c, ri = self.c, self.ri
        rows, owner, bad_ids = self._duplicated()
        n_bad = len(bad_ids)
        if n_bad == 0:
            return
        key, offset, value = c["key"][ri], c["offset"][ri], c["value"][ri]
        first = rows[first_per_group(owner, n_bad)]
        times = reduce_by(owner, n_bad, _time(c, ri[rows]), np.maximum, np.iinfo(np.int64).min)
        offs = lists(owner, offset[rows], n_bad)
        self.out.add(
            ANOMALY,
            n_bad,
            "duplicate",
            lists_={"offsets": offs, "ops": lists(owner, c["op"][ri][rows], n_bad)},
            key=key[first],
            value=value[first],
            offset=offs[1][offs[0][:-1]],
            time=times,
        )

    def _unread_must(self) -> np.ndarray:
        """One row per unread must-have-happened value (its first send)."""
        c = self.c
        um = np.flatnonzero(self.must & ~self.read)
        if len(um) == 0:
            return um
        ids, n = group_ids(self.kv[um])
        return um[first_per_group(ids, n, c["op"][um], c["mop_index"][um])]

    def _lost(self):
        """Unread must-have-happened values (their first send's row) and which
        of them are lost (placed at or below the key's read bound)."""
        rows = self._unread_must()
        kv = self.kv[rows]
        position = self.position[kv]
        bound = self.bound[self.kid[rows]]
        return rows, (position != NULL) & (bound >= 0) & (position <= bound)

    def lost_and_unseen(self):
        c = self.c
        rows, lost = self._lost()
        if len(rows) == 0:
            return
        kv = self.kv[rows]
        offset = np.where(self.log_offset[kv] != NULL, self.log_offset[kv], c["offset"][rows])
        lr, ur = rows[lost], rows[~lost]
        self.out.add(
            ANOMALY,
            len(lr),
            "lost-write",
            lists_={"ops": _compact_distinct_list(c["op"][lr], self.bound_op[self.kid[lr]])},
            key=c["key"][lr],
            value=c["value"][lr],
            offset=offset[lost],
            time=_time(c, lr),
        )
        self.out.add(
            ANOMALY,
            len(ur),
            "unseen",
            lists_={"ops": _single_list(c["op"][ur])},
            key=c["key"][ur],
            value=c["value"][ur],
            offset=offset[~lost],
            time=_time(c, ur),
        )

    def _reads_of(self, writers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(writer row, ok read row) pairs of the same (key, value)."""
        reads = np.flatnonzero(self.okread)
        wi, rj = join(self.kv[writers], self.kv[reads])
        return writers[wi], reads[rj]

    def aborted_reads(self):
        """`ok` reads of a value whose send op (or transaction) ended `fail`."""
        c = self.c
        w, r = self._reads_of(np.flatnonzero(self.send & self.fail))
        self.out.add(
            ANOMALY,
            len(w),
            "aborted-read",
            lists_={"ops": _pairs_list(c["op"][w], c["op"][r])},
            key=c["key"][r],
            value=c["value"][r],
            offset=c["offset"][r],
            time=c["complete_time"][r],
        )

    def uncommitted_reads(self):
        """Another process's `ok` read completed before the writer's transaction committed."""
        c = self.c
        writers = np.flatnonzero(self.send & ~self.fail & (c["commit_time"] != NULL))
        w, r = self._reads_of(writers)
        early = (c["pid"][r] != c["pid"][w]) & (c["commit_time"][w] > c["complete_time"][r])
        w, r = w[early], r[early]
        self.out.add(
            ANOMALY,
            len(w),
            "uncommitted-read",
            lists_={"ops": _pairs_list(c["op"][w], c["op"][r])},
            key=c["key"][r],
            value=c["value"][r],
            offset=c["offset"][r],
            time=c["complete_time"][r],
        )

    def precommitted_reads(self):
        """An `ok` op that read back a value it sent in that same op."""
        c = self.c
        sends, reads = np.flatnonzero(self.send), np.flatnonzero(self.okread)
        if len(sends) == 0 or len(reads) == 0:
            return
        ids, _ = group_ids(
            np.concatenate([c["op"][sends], c["op"][reads]]), np.concatenate([self.kv[sends], self.kv[reads]])
        )
        own = member(ids[len(sends) :], ids[: len(sends)])
        hits = reads[own]
        if len(hits) == 0:
            return
        hit_ids, n = group_ids(c["op"][hits], self.kv[hits])
        hits = hits[first_per_group(hit_ids, n, c["mop_index"][hits])]
        self.out.add(
            ANOMALY,
            len(hits),
            "precommitted-read",
            lists_={"ops": _single_list(c["op"][hits])},
            key=c["key"][hits],
            value=c["value"][hits],
            offset=c["offset"][hits],
            time=c["complete_time"][hits],
        )

    def _order_pairs(self, rows: np.ndarray, segment: np.ndarray):
        """Rows sorted by (key, process, op, mop); (previous, current) pairs of one key,
        process and segment."""
        c = self.c
        perm = order(c["key"][rows], c["pid"][rows], c["op"][rows], c["mop_index"][rows])
        rows, segment = rows[perm], segment[perm]
        same = previous_in_group(c["key"][rows], c["pid"][rows], segment)
        cur = np.flatnonzero(same)
        prev, cur = rows[cur - 1], rows[cur]
        if self.carried:
            ours = cur >= self.carried
            prev, cur = prev[ours], cur[ours]
        return prev, cur

    def _emit_order(self, name, prev, cur, index, offset):
        c = self.c
        self.out.add(
            ANOMALY,
            len(cur),
            name,
            lists_={
                "values": _pairs_list(c["value"][prev], c["value"][cur]),
                "offsets": _pairs_list(offset[prev], offset[cur]),
                "ops": _distinct_pairs_list(c["op"][prev], c["op"][cur]),
            },
            key=c["key"][cur],
            value=c["value"][cur],
            offset=offset[cur],
            time=c["complete_time"][cur],
        )

    def poll_order(self):
        """Successive `ok` reads of one key by one process, with no reset between."""
        c = self.c
        reads = np.flatnonzero(self.okread)
        if len(reads) < 2:
            return
        markers = np.flatnonzero(c["kind"] == REBALANCE_ROW)
        # A rebalance naming the key resets before and after the op's reads:
        # reads of that op sit alone, between two resets.
        group, _ = group_ids(
            np.concatenate([c["key"][reads], c["key"][markers]]), np.concatenate([c["pid"][reads], c["pid"][markers]])
        )
        read_group, marker_group = group[: len(reads)], group[len(reads) :]
        marker_at = np.unique((marker_group << 32) | c["op"][markers])
        at = (read_group << 32) | c["op"][reads]
        before = np.searchsorted(marker_at, at, "left") - np.searchsorted(marker_at, read_group << 32, "left")
        own = np.searchsorted(marker_at, at, "right") > np.searchsorted(marker_at, at, "left")
        segment = (c["seg"][reads] << 32) | (2 * before + own)
        prev, cur = self._order_pairs(reads, segment)
        index, offset = self.index, c["offset"]
        exempt = np.zeros(self.n, dtype=bool)
        exempt[reads[own]] = True
        across = c["op"][prev] != c["op"][cur]
        inside = ~across & ~exempt[cur]
        skip = index[cur] > index[prev] + 1
        back = index[cur] <= index[prev]
        for name, chosen in (
            ("poll-skip", across & skip),
            ("nonmonotonic-poll", across & back),
            ("int-poll-skip", inside & skip),
            ("int-nonmonotonic-poll", inside & back),
        ):
            self._emit_order(name, prev[chosen], cur[chosen], index, offset)

    def placed(self) -> tuple[np.ndarray, np.ndarray]:
        """Per row, a send's index and offset: its own when acknowledged
        with one, else its value's first (NULL for other rows)."""
        c = self.c
        index = np.where(c["offset"] != NULL, self.index, NULL)
        kv_pos = np.full(self.n, NULL, dtype=np.int64)
        kv_off = np.full(self.n, NULL, dtype=np.int64)
        s = np.flatnonzero(self.send)
        kv_pos[s], kv_off[s] = self.position[self.kv[s]], self.log_offset[self.kv[s]]
        return np.where(index != NULL, index, kv_pos), np.where(c["offset"] != NULL, c["offset"], kv_off)

    def send_order(self):
        """A process's successive sends to a key, placed where the log shows them."""
        c = self.c
        placed_index, offset = self.placed()
        sends = np.flatnonzero(self.must & (placed_index != NULL))
        if len(sends) < 2:
            return
        ok_sends = sends[self.ok[sends]]
        prev, cur = self._order_pairs(ok_sends, c["seg"][ok_sends])
        across = c["op"][prev] != c["op"][cur]
        back = placed_index[cur] <= placed_index[prev]
        self._emit_order("nonmonotonic-send", prev[across & back], cur[across & back], placed_index, offset)
        prev, cur = self._order_pairs(sends, c["seg"][sends])
        inside = c["op"][prev] == c["op"][cur]
        skip = placed_index[cur] > placed_index[prev] + 1
        back = placed_index[cur] <= placed_index[prev]
        self._emit_order("int-send-skip", prev[inside & skip], cur[inside & skip], placed_index, offset)
        self._emit_order("int-nonmonotonic-send", prev[inside & back], cur[inside & back], placed_index, offset)

    def _committed(self, groups: np.ndarray | None = None):
        """Per (group, key) with `ok` commits: the committed offset, its op and time."""
        c = self.c
        if self.key_facts is not None:
            g, committed, op, time = self.key_facts.committed
            chosen = slice(None) if groups is None else member(g, groups)
            return g[chosen], np.full(len(g[chosen]), c["key"][0]), committed[chosen], op[chosen], time[chosen]
        rows = np.flatnonzero(self.commit & self.ok & (c["group"] != NULL))
        if groups is not None:
            rows = rows[member(c["group"][rows], groups)]
        if len(rows) == 0:
            return rows, rows, rows, rows, rows
        gk, n = group_ids(c["group"][rows], c["key"][rows])
        best = rows[first_per_group(gk, n, -c["offset"][rows], c["op"][rows])]
        return c["group"][best], c["key"][best], c["offset"][best], c["op"][best], c["complete_time"][best]

    def _records_below(self, groups=None):
        """(must row, commit) pairs: a record whose first offset lies below a
        group's committed position for its key."""
        c = self.c
        g, k, committed, commit_op, commit_time = self._committed(groups)
        records = np.flatnonzero(self.must)
        records = records[self.log_offset[self.kv[records]] != NULL]
        ri, gj = join(c["key"][records], k)
        below = self.log_offset[self.kv[records[ri]]] < committed[gj]
        ri, gj = ri[below], gj[below]
        return records[ri], g[gj], commit_op[gj], commit_time[gj]

    def offset_commit_loss(self):
        """A group committed past a record that none of its `ok` pollers read."""
        c = self.c
        rec, group, commit_op, commit_time = self._records_below()
        if len(rec) == 0:
            return
        reads = np.flatnonzero(self.okread & (c["group"] != NULL))
        ids, _ = group_ids(np.concatenate([group, c["group"][reads]]), np.concatenate([self.kv[rec], self.kv[reads]]))
        lost = ~member(ids[: len(rec)], ids[len(rec) :])
        rec, commit_op, commit_time = rec[lost], commit_op[lost], commit_time[lost]
        self.out.add(
            ANOMALY,
            len(rec),
            "offset-commit-loss",
            lists_={"ops": _pairs_list(c["op"][rec], commit_op)},
            key=c["key"][rec],
            value=c["value"][rec],
            offset=self.log_offset[self.kv[rec]],
            time=commit_time,
        )

    def follow_ups(self):
        """Small facts that finders of several keys join on."""
        c, p = self.c, self.p
        if p.drain_complete:
            torn = np.flatnonzero(self.must & ~self.read & self.txn & (c["n_send_keys"] >= 2))
            offset = np.where(c["offset"][torn] != NULL, c["offset"][torn], self.log_offset[self.kv[torn]])
            self.out.add(
                TORN,
                len(torn),
                key=c["key"][torn],
                value=c["value"][torn],
                offset=offset,
                time=c["complete_time"][torn],
                a=c["op"][torn],
            )
        if len(p.fenced):
            z = np.flatnonzero(self.send & member(c["op"], p.fenced))
            self.out.add(
                ZOMBIE_SEND,
                len(z),
                key=c["key"][z],
                value=c["value"][z],
                offset=c["offset"][z],
                a=c["op"][z],
                b=c["mop_index"][z],
                c=self.read[z],
            )
        info_must = np.flatnonzero(self.must & self.info)
        self.out.add(
            INFO_NODE, len(info_must), key=c["key"][info_must], a=c["op"][info_must], b=c["mop_index"][info_must]
        )
        if len(p.copier_groups):
            self.eos_rows()

    def eos_rows(self):
        """What eos's two joins need, cut down here to the inputs a join can
        still find something about (issue 42: at 10M events they joined
        every copied input, 1.85M rows three times over).

        - The outputs that must have happened, with their input: EOS_OUT for
          an `ok` op's, EOS_INFO_OUT for an `info` op's, and EOS_UNPROVEN
          for an `info` op's when the readers read uncommitted records (such
          a read shows the output was written, not that its transaction
          committed).
        - EOS_POS, the inputs that may have been copied twice: two or more
          copier-input markers (one per derived send) of one group on one
          input, with the input's offset (NULL when the log does not place
          it). An input copied to two outputs has two markers.
        - EOS_REC, the input records below a copier group's committed
          position that no `ok` op of the group copied: an `ok` op's
          derived send must have happened, so only an `info` op's output
          can still have copied them.
        - EOS_COUNT, one row per run of the pass that has any of the last
          three: how many EOS_POS (a), EOS_REC (b) and `info` outputs (c)
          it made, so that eos knows their sizes before it joins
          (passes.SMALL_TAGS brings them back with the pass's small rows).
        """
        c, p = self.c, self.p
        out = np.flatnonzero(self.must & (c["from_key"] != NULL) & member(c["group"], p.copier_groups))
        ok_out = self.ok[out]
        info_proven = ~ok_out & (not p.read_uncommitted)
        info_unproven = ~ok_out & p.read_uncommitted
        for tag, rows in ((EOS_OUT, out[ok_out]), (EOS_INFO_OUT, out[info_proven]), (EOS_UNPROVEN, out[info_unproven])):
            self.out.add(
                tag,
                len(rows),
                key=c["key"][rows],
                value=c["value"][rows],
                time=c["complete_time"][rows],
                a=c["group"][rows],
                b=c["from_key"][rows],
                c=c["from_value"][rows],
                d=c["op"][rows],
            )
        marks = np.flatnonzero((c["kind"] == FROM_ROW) & member(c["group"], p.copier_groups))
        rec, group, commit_op, commit_time = self._records_below(p.copier_groups)
        okm = marks[self.ok[marks]]
        ids, _ = group_ids(
            np.concatenate([group, c["group"][okm]]),
            np.concatenate([c["key"][rec], c["key"][okm]]),
            np.concatenate([c["value"][rec], c["from_value"][okm]]),
        )
        uncopied = ~member(ids[: len(rec)], ids[len(rec) :])
        rec, group, commit_op, commit_time = rec[uncopied], group[uncopied], commit_op[uncopied], commit_time[uncopied]
        self.out.add(
            EOS_REC,
            len(rec),
            key=c["key"][rec],
            value=c["value"][rec],
            offset=self.log_offset[self.kv[rec]],
            time=commit_time,
            a=group,
            b=c["op"][rec],
            c=commit_op,
        )
        ids, n = group_ids(c["group"][marks], c["key"][marks], c["from_value"][marks])
        twice = marks[first_per_group(ids, n)][np.bincount(ids, minlength=n) >= 2]
        kv = self.kv_of(c["key"][twice], c["from_value"][twice])
        at = np.full(len(twice), NULL, dtype=np.int64)
        at[kv >= 0] = self.log_offset[kv[kv >= 0]]
        self.out.add(
            EOS_POS, len(twice), key=c["key"][twice], value=c["from_value"][twice], offset=at, a=c["group"][twice]
        )
        counts = np.array([len(twice), len(rec), int((~ok_out).sum())])
        if counts.any():
            self.out.add(EOS_COUNT, 1, a=counts[:1], b=counts[1:2], c=counts[2:])

    def liveness(self):
        """Candidates for stuck-lso: a process's first read of a value, invoked
        more than the transaction timeout after the later of the value's
        acknowledgement and the process's previous read of that key. Until
        that previous read the reader was still getting older records of the
        key (a consumer catching up, e.g. a replacement that reads from the
        beginning): behind, not held back by the last stable offset. Whether
        the reader polled the key all along from there is decided per process
        later."""
        c, p = self.c, self.p
        if p.timeout is None:
            return
        reads = np.flatnonzero(self.okread)
        if len(reads) == 0:
            return
        ids, n = group_ids(c["pid"][reads], self.kv[reads])
        first = reads[first_per_group(ids, n, c["invoke_time"][reads], c["op"][reads], c["offset"][reads])]
        del ids
        acks = np.flatnonzero(self.must & self.ok)
        fi, aj = join(self.kv[first], self.kv[acks])
        f, a = first[fi], acks[aj]
        del first, acks, fi, aj
        since = np.maximum(c["complete_time"][a], self._previous_read_time(reads, f))
        late = c["invoke_time"][f] - since > p.timeout
        f, a, since = f[late], a[late], since[late]
        self.out.add(
            LATE,
            len(f),
            key=c["key"][f],
            value=c["value"][f],
            offset=c["offset"][f],
            time=c["invoke_time"][f],
            a=c["pid"][f],
            b=c["op"][f],
            c=c["op"][a],
            d=since,
        )

    def _previous_read_time(self, reads: np.ndarray, firsts: np.ndarray) -> np.ndarray:
        """Per row of `firsts`: the latest completion of an `ok` read of the same
        key by the same process that completed before the row's op was invoked
        (NULL where none)."""
        c = self.c
        if self.key_facts is not None:
            return self._previous_read_time_of_key(firsts)
        rows = np.concatenate([reads, firsts])
        at = np.concatenate([c["complete_time"][reads], c["invoke_time"][firsts]])
        is_read = np.arange(len(rows)) < len(reads)
        pid, key = c["pid"][rows], c["key"][rows]
        del rows
        # at equal times the first read sorts before the read, which then does not count
        perm = order(pid, key, at, is_read.astype(np.int64))
        group_start = starts(pid[perm], key[perm])
        del pid, key
        carried = fill_forward(at[perm], is_read[perm], group_start)
        del at, is_read, group_start
        out = np.empty(len(perm), dtype=np.int64)
        out[perm] = carried
        return out[len(reads) :]

    def _previous_read_time_of_key(self, firsts: np.ndarray) -> np.ndarray:
        """`_previous_read_time` from the whole key's `ok` read times, one
        process at a time (a run has few)."""
        c, f = self.c, self.key_facts
        out = np.full(len(firsts), NULL, dtype=np.int64)
        pid, at = c["pid"][firsts], c["invoke_time"][firsts]
        for process in np.unique(pid):
            times = f.read_times.get(int(process), np.empty(0, np.int64))
            mine = np.flatnonzero(pid == process)
            before = np.searchsorted(times, at[mine], "left")  # reads completed strictly before
            has = before > 0
            out[mine[has]] = times[before[has] - 1]
        return out

    def lag(self):
        """Per completion bucket and key, the worst time from a value's
        acknowledged send to an `ok` read of it (never negative)."""
        c, p = self.c, self.p
        if not p.lag_bucket:
            return
        acks = np.flatnonzero(self.must & self.ok)
        acked_at = reduce_by(self.kv[acks], self.n_kv, c["complete_time"][acks], np.minimum, np.iinfo(np.int64).max)
        reads = np.flatnonzero(self.okread)
        reads = reads[acked_at[self.kv[reads]] != np.iinfo(np.int64).max]
        if len(reads) == 0:
            return
        done = c["complete_time"][reads]
        lag = np.maximum(done - acked_at[self.kv[reads]], 0)
        bucket = np.floor(done.astype(np.float64) / float(p.lag_bucket)).astype(np.int64)
        ids, n = group_ids(bucket, c["key"][reads])
        worst = reduce_by(ids, n, lag, np.maximum, np.iinfo(np.int64).min)
        first = first_per_group(ids, n)
        self.out.add(LAG, n, key=c["key"][reads][first], a=bucket[first], b=worst)

    # ------------------------------------------------------------ cycles

    def _phi(self, rows: np.ndarray, reading: np.ndarray) -> np.ndarray:
        """Doubled potential of the nodes of these rows (docs/CHECKERS.md, cycles)."""
        c = self.c
        start = c["invoke_time"][rows]
        end = np.where(c["complete_time"][rows] != NULL, c["complete_time"][rows], NO_TIME)
        commit = c["commit_time"][rows]
        committed = np.minimum(np.maximum(commit, start), end)
        done = np.where(c["complete_time"][rows] != NULL, c["complete_time"][rows], start)
        phi = np.where(commit != NULL, committed, np.where(reading, done, start))
        return 2 * phi

    def _graph(self, with_nodes: bool = True, spans: bool = False, parts: frozenset = frozenset(("chain", "wr"))):
        """Writer and reader nodes with their potential, uncompressed and compressed edges
        (nodes: None unless `with_nodes`). Each temporary goes as soon as it is dead:
        the graph's arrays are the pass's peak on a large key (issue 42). With
        `spans`, each part of the edges is made into its SPAN rows as soon as
        it is built and goes (edges and compressed come back None): the main
        pass needs no more of them, and the uncompressed edges, held through
        the compressed ones' making, were most of the peak. `parts`: the
        edges of the key's chain of writers (ww and compressed), the wr
        edges, or both (a piece of a large key makes one or the other;
        nodes come with the wr edges)."""
        c = self.c
        edges, compressed = [], []  # parts (src, dst, kind, key, src_phi, dst_phi)

        def put(into: list, part: tuple, component: int | None):
            if spans:
                self._spans(part, component)
            else:
                into.append(part)

        writers, per_send, w_node, w_reads, w_phi = self._writers()
        w_pos = self.position[self.kv[writers]]
        w_kv = self.kv[writers]
        w_key = c["key"][writers]
        reads, r_node, r_phi = self._readers()
        r_kv = self.kv[reads]
        r_key = c["key"][reads]
        # ww: the key's chain of placed writers, by position then node
        placed = np.flatnonzero(w_pos != NULL)
        chain = placed[order(w_key[placed], w_pos[placed], w_node[placed])]
        del placed
        chain_key = w_key[chain]
        j_node = w_node[chain]
        chain_phi = w_phi[chain]
        if "chain" in parts:
            nxt = np.flatnonzero(previous_in_group(chain_key))
            put(edges, (j_node[nxt - 1], j_node[nxt], WW, chain_key[nxt], chain_phi[nxt - 1], chain_phi[nxt]), S_WW)
            del nxt
        if "wr" in parts:  # writer -> every ok reader of its value
            wi, rj = join(w_kv, r_kv)
            put(edges, (w_node[wi], r_node[rj], WR, r_key[rj], w_phi[wi], r_phi[rj]), S_WR)
            del wi, rj
        edges = None if spans else _stack(edges)
        nodes = None
        if with_nodes and "wr" in parts:
            nodes = (
                np.concatenate([w_node, r_node]),
                np.concatenate([c["op"][writers], c["op"][reads]]),
                np.concatenate([w_phi, r_phi]),
            )
        if "chain" not in parts:
            return edges, None if spans else _stack([]), nodes
        # compressed: junctions only. A node with one record in one chain and
        # no read sits on that chain between its neighbours and nothing else:
        # a node that writes two records (two keys, or one key twice) or that
        # reads and writes is a junction; every data-only cycle passes one.
        records = np.where(per_send, 1, c["n_sends"][writers])
        junction = (records >= 2) | w_reads
        del records, per_send, w_reads
        chain_junction = junction[chain]
        group_start = starts(chain_key)
        jr = self.junction_reads(reads)
        jr_kv, jr_node, jr_key, jr_phi = r_kv[jr], r_node[jr], r_key[jr], r_phi[jr]
        del jr, r_kv, r_key
        # A path through plain writers that leaves a junction and comes back to
        # it (ww to the same junction again, or wr to the junction itself) would
        # fold into a self-loop: its writers stay nodes of their own.
        owner = fill_forward(j_node, chain_junction, group_start)
        next_j = fill_backward_after(j_node, chain_junction, group_start)
        chain_kv = w_kv[chain]
        pair_ids, _ = group_ids(np.concatenate([chain_kv, jr_kv]), np.concatenate([owner, jr_node]))
        read_by_owner = member(pair_ids[: len(chain)], pair_ids[len(chain) :])
        del pair_ids
        chain_junction = chain_junction | ((owner != NULL) & ((owner == next_j) | read_by_owner))
        del read_by_owner, owner
        next_j = fill_backward_after(j_node, chain_junction, group_start)
        next_j_phi = fill_backward_after(chain_phi, chain_junction, group_start)
        has_next = chain_junction & (next_j != NULL)
        put(
            compressed,
            (j_node[has_next], next_j[has_next], WW, chain_key[has_next], chain_phi[has_next], next_j_phi[has_next]),
            S_CWW,
        )
        del next_j, next_j_phi, has_next, chain_key
        owner = fill_forward(j_node, chain_junction, group_start)
        owner_phi = fill_forward(chain_phi, chain_junction, group_start)
        del chain_junction, group_start, chain_phi
        owned = owner != NULL
        unplaced_j = np.flatnonzero((w_pos == NULL) & junction)
        del junction
        o_kv = np.concatenate([chain_kv[owned], w_kv[unplaced_j]])
        del chain_kv
        o_node = np.concatenate([j_node[owned], w_node[unplaced_j]])
        o_owner = np.concatenate([owner[owned], w_node[unplaced_j]])
        o_phi = np.concatenate([owner_phi[owned], w_phi[unplaced_j]])
        del owner, owner_phi, owned, unplaced_j, j_node, chain
        oi, rj = join(o_kv, jr_kv)
        del o_kv, jr_kv
        o_owner = o_owner[oi]
        kinds = np.where(o_owner == o_node[oi], WR, WW | WR)
        del o_node
        put(compressed, (o_owner, jr_node[rj], kinds, jr_key[rj], o_phi[oi], jr_phi[rj]), None)
        del o_owner, kinds, oi, rj, o_phi, jr_node, jr_key, jr_phi
        compressed = None if spans else _stack(compressed)
        return edges, compressed, nodes

    def _writers(self):
        """The graph's writer rows (sends that must have happened), whether
        each is a node of its own (a non-transactional op's sends), its node,
        whether that node also reads, and its potential."""
        c = self.c
        writers = np.flatnonzero(self.must)
        per_send = ~self.txn[writers] & (c["n_sends"][writers] >= 2)
        w_node = c["op"][writers] * NODE_SHIFT + np.where(per_send, c["mop_index"][writers] + 1, 0)
        w_reads = ~per_send & (c["reads"][writers] == 1)
        return writers, per_send, w_node, w_reads, self._phi(writers, w_reads)

    def _readers(self):
        """The graph's reader rows (`ok` reads, one per value and node), their node and potential."""
        c = self.c
        reads = np.flatnonzero(self.okread)
        r_node = c["op"][reads] * NODE_SHIFT
        r_phi = self._phi(reads, np.ones(len(reads), dtype=bool))
        ids, n = group_ids(self.kv[reads], r_node)
        keep = first_per_group(ids, n)
        del ids
        return reads[keep], r_node[keep], r_phi[keep]

    def chain_inputs(self) -> tuple[dict, dict]:
        """What the chain of a large key's writers needs of this piece
        (checkers/pieces.py): its placed writers (position, node, potential,
        value, whether a junction) and its junction reads (value, node,
        potential, the value's position). A writer the log does not place
        joins no junction read: such a read is a record of its value."""
        c = self.c
        writers, per_send, w_node, w_reads, w_phi = self._writers()
        w_pos = self.position[self.kv[writers]]
        records = np.where(per_send, 1, c["n_sends"][writers])
        junction = ((records >= 2) | w_reads).astype(np.int8)
        placed = w_pos != NULL
        w = {"pos": w_pos, "node": w_node, "phi": w_phi, "value": c["value"][writers], "junction": junction}
        w = {name: values[placed] for name, values in w.items()}
        reads, r_node, r_phi = self._readers()
        jr = self.junction_reads(reads)
        reads = reads[jr]
        j = {"pos": self.position[self.kv[reads]], "node": r_node[jr], "phi": r_phi[jr], "value": c["value"][reads]}
        return w, j

    def junction_reads(self, reads: np.ndarray) -> np.ndarray:
        """Which of these read rows belong to an op that also writes (a junction of the compressed graph)."""
        c = self.c
        return (c["n_sends"][reads] >= 1) & (self.txn[reads] | (c["n_sends"][reads] == 1))

    def _spans(self, part: tuple, component: int | None):
        add_spans(self.out, part, component)

    def cycles(self, spans_only: bool, parts: frozenset = frozenset(("chain", "wr"))):
        if not parts:
            return
        if spans_only:
            self._graph(with_nodes=False, spans=True, parts=parts)
            return
        edges, compressed, nodes = self._graph(parts=parts)
        intervals = self.p.intervals
        add_edges(self.out, intervals, compressed, compressed=True)
        add_edges(self.out, intervals, edges, compressed=False)
        if nodes is None:
            return
        node, op, phi = nodes
        for family in (I_WR, I_ALL):
            if family in intervals:
                lo, hi = intervals[family]
                chosen = covered(phi, lo, hi)
                ids, n = group_ids(node[chosen])
                first = first_per_group(ids, n)
                self.out.add(
                    NODE, n, a=node[chosen][first], b=op[chosen][first], c=phi[chosen][first], d=np.full(n, family)
                )

    def _reach(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per row, the doubled times its op's graph ports and nodes can take
        ([2 * earliest - 1, 2 * latest + 1] of its invoke, completion and
        commit time), and whether it has a time at all."""
        # Column by column, in place: stacking the three columns held four copies of every row's times.
        c, most = self.c, np.iinfo(np.int64).max
        lo = np.full(self.n, most, dtype=np.int64)
        hi = np.full(self.n, NULL, dtype=np.int64)  # NULL is the smallest int64: it never wins a maximum
        for column in ("invoke_time", "complete_time", "commit_time"):
            times = c[column]
            np.minimum(lo, times, out=lo, where=times != NULL)
            np.maximum(hi, times, out=hi)
        has = hi != NULL
        lo *= 2
        lo -= 1
        hi *= 2
        hi += 1
        lo[~has] = 0
        hi[~has] = 0
        return lo, hi, has

    def cover(self):
        """Per key, the bins of the run its rows' times reach into (a row
        without an op's times reaches everywhere): the cycle search tests
        these against the spans instead of scanning the table for the keys
        near one. Bins only widen a reach, so the keys they name include
        every key near a span."""
        if self.p.cover is None or not self.n:
            return
        n_bins = self.p.cover[2]
        lo, hi, _ = self._reach()
        anywhere = self.c["invoke_time"] == NULL
        lo = np.where(anywhere, 0, cover_bin(lo, self.p.cover))
        hi = np.where(anywhere, n_bins - 1, cover_bin(hi, self.p.cover))
        words = bitmaps(self.kid, lo, hi, self.n_keys, n_bins)
        first = first_per_group(self.kid, self.n_keys)
        offsets = np.arange(0, words.size + 1, words.shape[1], dtype=np.int64)
        self.out.add(COVER, self.n_keys, key=self.c["key"][first], lists_={"values": (offsets, words.ravel())})

    def routes(self):
        """The processes with a row whose op reaches into the widest interval
        set: each process with a graph op that has a port there (a port's
        phi lies within its op's reach, and every graph op has key rows on
        keys near a span, which this pass reads)."""
        if self.p.wide is None or not self.n:
            return
        lo, hi, has = self._reach()
        pid = self.c["pid"]
        hit = has & (pid != NULL) & meets(lo, hi, *self.p.wide)
        pids = np.unique(pid[hit])
        self.out.add(ROUTE, len(pids), a=pids)

    # ------------------------------------------------------------ facts and pictures

    def facts(self):
        """The shared facts themselves (tests and tools): log, positions, must writes, bounds."""
        c, ri = self.c, self.ri
        ids, n = group_ids(c["key"][ri], c["offset"][ri], c["value"][ri])
        first = ri[first_per_group(ids, n)]
        self.out.add(
            LOG,
            len(first),
            key=c["key"][first],
            offset=c["offset"][first],
            value=c["value"][first],
            a=self.index[first],
        )
        kv_rows = first_per_group(self.kv[ri], self.n_kv)
        kv_rows = ri[kv_rows[kv_rows >= 0]]
        self.out.add(
            POSITION,
            len(kv_rows),
            key=c["key"][kv_rows],
            value=c["value"][kv_rows],
            offset=self.log_offset[self.kv[kv_rows]],
            a=self.position[self.kv[kv_rows]],
        )
        must = np.flatnonzero(self.must)
        self.out.add(
            MUST,
            len(must),
            key=c["key"][must],
            value=c["value"][must],
            offset=c["offset"][must],
            a=c["op"][must],
            b=c["mop_index"][must],
            c=self.read[must],
        )
        has = self.bound >= 0
        first_of_key = first_per_group(self.kid, self.n_keys)
        self.out.add(BOUND, int(has.sum()), key=c["key"][first_of_key][has], a=self.bound[has])

    def picture(self):
        """The log of the named keys around their anomalies: offset, index,
        values and the worst status of its values (docs/RESULTS.md)."""
        c, ri, p = self.c, self.ri, self.p
        ids, n = group_ids(c["key"][ri], c["offset"][ri], c["value"][ri])
        first = ri[first_per_group(ids, n)]
        key, offset, value, index = c["key"][first], c["offset"][first], c["value"][first], self.index[first]
        wanted = member(key, p.picture_keys)
        key, offset, value, index, first = key[wanted], offset[wanted], value[wanted], index[wanted], first[wanted]
        kv = self.kv[first]
        sends = np.flatnonzero(self.send)
        failed = np.zeros(self.n_kv, dtype=bool)
        failed[self.kv[sends[self.fail[sends]]]] = True
        must = np.zeros(self.n_kv, dtype=bool)
        must[self.kv[np.flatnonzero(self.must)]] = True

        unread, lost = self._lost()
        lost_kv = np.zeros(self.n_kv, dtype=bool)
        unseen_kv = np.zeros(self.n_kv, dtype=bool)
        lost_kv[self.kv[unread[lost]]] = True
        unseen_kv[self.kv[unread[~lost]]] = True
        dup_kv = np.zeros(self.n_kv, dtype=bool)
        dup_kv[self._duplicated()[2]] = True

        rank = np.where(
            failed[kv],
            STATUS_ORDER.index("aborted"),
            np.where(
                lost_kv[kv],
                STATUS_ORDER.index("lost"),
                np.where(
                    unseen_kv[kv],
                    STATUS_ORDER.index("unseen"),
                    np.where(
                        self.read_kv[kv] & must[kv],
                        STATUS_ORDER.index("read"),
                        np.where(must[kv], STATUS_ORDER.index("acked-unread"), STATUS_ORDER.index("unacked")),
                    ),
                ),
            ),
        )
        dup = dup_kv[kv]
        # the slice: from `margin` offsets before the lowest named offset of the
        # key that is in its log (else from its start), at most max_offsets
        pk = np.searchsorted(p.picture_keys, key)
        if self.key_facts is None:
            named_ids, _ = group_ids(np.concatenate([key, p.named_keys]), np.concatenate([offset, p.named_offsets]))
            is_named = member(named_ids[: len(key)], named_ids[len(key) :])
            lo_index = np.full(len(p.picture_keys), np.iinfo(np.int64).max, dtype=np.int64)
            if is_named.any():
                np.minimum.at(lo_index, pk[is_named], index[is_named])
            lo_index[lo_index == np.iinfo(np.int64).max] = 0
        else:  # a piece of a large key: its named offsets' first index in the key's log
            lo_index = np.zeros(len(p.picture_keys), dtype=np.int64)
            if self.n:
                named = p.named_offsets[p.named_keys == c["key"][0]]
                at, found = find(self.key_facts.offsets, named)
                lo_index[np.searchsorted(p.picture_keys, c["key"][0])] = at[found].min() if found.any() else 0
        lo = np.maximum(lo_index[pk] - p.margin, 0)
        inside = (index >= lo) & (index < lo + p.max_offsets)
        self.out.add(
            PICTURE,
            int(inside.sum()),
            key=key[inside],
            offset=offset[inside],
            value=value[inside],
            a=index[inside],
            b=rank[inside],
            c=dup[inside],
        )
        if self.key_facts is not None:
            return  # the key's total comes from its facts (pieces.large_key_parts)
        ko, n_ko = group_ids(key, offset)
        totals = np.bincount(pk[first_per_group(ko, n_ko)], minlength=len(p.picture_keys))
        present = np.unique(pk)
        self.out.add(PICTURE, len(present), key=p.picture_keys[present], a=np.full(len(present), -1), b=totals[present])


def add_spans(out: Rows, part: tuple, component: int | None):
    """SPAN rows of one part of the edges: each edge that does not go
    forward in time (its target's potential at most its source's, no
    self-loop), as the interval it spans. `component` None: a compressed
    part of mixed kinds, its WR edges S_CWR and the rest S_CWW."""
    src, dst, kind, _key, src_phi, dst_phi = part
    chosen = (dst_phi <= src_phi) & (src != dst)
    if component is None:
        wr = kind == WR
        pieces = ((S_CWR, chosen & wr), (S_CWW, chosen & ~wr))
    else:
        pieces = ((component, chosen),)
    for name, rows in pieces:
        n = int(rows.sum())
        out.add(SPAN, n, a=np.full(n, name), b=dst_phi[rows], c=src_phi[rows])


def add_edges(out: Rows, intervals: dict, graph: tuple, compressed: bool):
    """EDGE rows of a part of the graph (uncompressed or compressed) for the
    cycle pass's interval sets that read it: both ends inside the set."""
    families = ((I_CWR, (WR,)), (I_C, None)) if compressed else ((I_WR, (WR,)), (I_ALL, None))
    for family, kinds in families:
        if family not in intervals:
            continue
        lo, hi = intervals[family]
        src, dst, kind, key, src_phi, dst_phi = graph
        chosen = (src != dst) & covered(src_phi, lo, hi) & covered(dst_phi, lo, hi)
        if kinds is not None:
            chosen &= member(kind, np.array(kinds))
        n = int(chosen.sum())
        out.add(EDGE, n, key=key[chosen], a=src[chosen], b=dst[chosen], c=kind[chosen], d=np.full(n, family))


def _graph_parts(families: frozenset) -> frozenset:
    """The graph's parts (KeyPass._graph) that these step families make."""
    return frozenset(part for part, family in (("chain", "C"), ("wr", "V")) if family in families)


def cover_bin(times, cover: tuple) -> np.ndarray:
    """The bin of each doubled time in the cover (origin, width, bins),
    clipped to the run: the main pass's bitmaps and the driver's spans must
    be binned alike for the keys they name to include every key near a span."""
    origin, width, n_bins = cover
    return np.clip((np.asarray(times, np.int64) - origin) // width, 0, n_bins - 1)


def _stack(parts):
    """Concatenates edge tuples (src, dst, kind, key, src_phi, dst_phi); each
    part's column goes once it is copied (the list of parts is emptied)."""
    held, parts = parts, [list(part) for part in parts]
    held.clear()
    sizes = [len(part[0]) for part in parts]
    columns = []
    for i in range(6):
        pieces = []
        for part, n in zip(parts, sizes):
            value = part[i]
            part[i] = None
            pieces.append(np.full(n, value, dtype=np.int64) if np.isscalar(value) else np.asarray(value, np.int64))
            del value
        columns.append(np.concatenate(pieces) if pieces else np.empty(0, np.int64))
        del pieces
    return tuple(columns)
