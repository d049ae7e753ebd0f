"""Vectorised building blocks of the per-key pass: grouping, ranking and
joining numpy columns without a Python loop per row.

Conventions: integer columns are int64 and use NULL (the smallest int64)
for a missing value; "sorted" means by numpy's stable lexicographic order.
"""

from __future__ import annotations

import numpy as np

NULL = np.iinfo(np.int64).min


def order(*columns: np.ndarray) -> np.ndarray:
    """The permutation that sorts rows by the given columns, first column first."""
    if not columns or len(columns[0]) == 0:
        return np.arange(0 if not columns else len(columns[0]))
    return np.lexsort(tuple(reversed(columns)))


def starts(*sorted_columns: np.ndarray) -> np.ndarray:
    """True where a row of sorted columns differs from the row before it (and on row 0)."""
    n = len(sorted_columns[0])
    new = np.zeros(n, dtype=bool)
    if n:
        new[0] = True
        for column in sorted_columns:
            new[1:] |= column[1:] != column[:-1]
    return new


def group_ids(*columns: np.ndarray) -> tuple[np.ndarray, int]:
    """A dense id per distinct row of the columns (in sorted order of the rows), and how many."""
    n = len(columns[0])
    ids = np.empty(n, dtype=np.int64)
    if n == 0:
        return ids, 0
    perm = order(*columns)
    new = starts(*(c[perm] for c in columns))
    ids[perm] = np.cumsum(new) - 1
    return ids, int(new.sum())


def dense_rank_within(group: np.ndarray, value: np.ndarray) -> np.ndarray:
    """0-based dense rank of each value within its group."""
    n = len(group)
    rank = np.empty(n, dtype=np.int64)
    if n == 0:
        return rank
    perm = order(group, value)
    g, v = group[perm], value[perm]
    new_group = starts(g)
    new_value = starts(g, v)
    counter = np.cumsum(new_value)
    # subtract the counter value at the start of each group
    base = np.maximum.accumulate(np.where(new_group, counter, 0))
    rank[perm] = counter - base
    return rank


def first_per_group(ids: np.ndarray, n_groups: int, *tiebreak: np.ndarray) -> np.ndarray:
    """Row index of the first row of each group id, in the order of `tiebreak` columns (-1 if empty)."""
    result = np.full(n_groups, -1, dtype=np.int64)
    if len(ids) == 0:
        return result
    perm = order(ids, *tiebreak)
    new = starts(ids[perm])
    result[ids[perm][new]] = perm[new]
    return result


def reduce_by(ids: np.ndarray, n_groups: int, values: np.ndarray, ufunc, empty) -> np.ndarray:
    """ufunc-reduction (np.minimum, np.maximum, ...) of values per group id."""
    out = np.full(n_groups, empty, dtype=values.dtype if values.dtype != bool else np.int64)
    if len(ids):
        ufunc.at(out, ids, values)
    return out


def join(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) with left[i] == right[j] (an inner equi-join of two id columns)."""
    if len(left) == 0 or len(right) == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    rperm = np.argsort(right, kind="stable")
    rsorted = right[rperm]
    lo = np.searchsorted(rsorted, left, "left")
    hi = np.searchsorted(rsorted, left, "right")
    counts = hi - lo
    li = np.repeat(np.arange(len(left)), counts)
    # position of each output row within its left row's run
    offsets = np.repeat(np.cumsum(counts) - counts, counts)
    within = np.arange(len(li)) - offsets
    rj = rperm[np.repeat(lo, counts) + within]
    return li, rj


def member(values: np.ndarray, of: np.ndarray) -> np.ndarray:
    """values[i] in the set `of`."""
    if len(of) == 0:
        return np.zeros(len(values), dtype=bool)
    return np.isin(values, of)


def search(sorted_values: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """np.searchsorted (left) of queries in any order: they are searched in
    sorted order, where each search starts from the last one's place (in a
    large array, searches in random order cost a cache miss a step)."""
    if len(queries) < 2:
        return np.searchsorted(sorted_values, queries)
    perm = np.argsort(queries)
    out = np.empty(len(queries), dtype=np.int64)
    out[perm] = np.searchsorted(sorted_values, queries[perm])
    return out


def find(sorted_values: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each query stands in sorted distinct values (an index to read
    their companions at, always in range when there are any), and whether it is there."""
    if len(sorted_values) == 0:
        return np.zeros(len(queries), dtype=np.int64), np.zeros(len(queries), dtype=bool)
    at = np.minimum(search(sorted_values, queries), len(sorted_values) - 1)
    return at, sorted_values[at] == queries


def previous_in_group(*sorted_columns: np.ndarray) -> np.ndarray:
    """For rows sorted by their group columns: True where the row before is in the same group."""
    same = ~starts(*sorted_columns)
    if len(same):
        same[0] = False
    return same


def fill_forward(values: np.ndarray, present: np.ndarray, group_start: np.ndarray) -> np.ndarray:
    """For rows sorted by group: the last present value at or before each row in its group (NULL where none)."""
    n = len(values)
    out = np.full(n, NULL, dtype=np.int64)
    if n == 0:
        return out
    positions = np.arange(n)
    carried = np.maximum.accumulate(np.where(present, positions, -1))
    first = np.maximum.accumulate(np.where(group_start, positions, 0))
    valid = carried >= first
    out[valid] = values[carried[valid]]
    return out


def fill_backward_after(values: np.ndarray, present: np.ndarray, group_start: np.ndarray) -> np.ndarray:
    """For rows sorted by group: the first present value strictly after each row in its group (NULL where none)."""
    n = len(values)
    out = np.full(n, NULL, dtype=np.int64)
    if n == 0:
        return out
    positions = np.arange(n)
    at_or_after = np.minimum.accumulate(np.where(present, positions, n)[::-1])[::-1]
    after = np.full(n, n, dtype=np.int64)
    after[:-1] = at_or_after[1:]
    group_end = np.zeros(n, dtype=bool)
    group_end[:-1] = group_start[1:]
    group_end[-1] = True
    last = np.minimum.accumulate(np.where(group_end, positions, n - 1)[::-1])[::-1]
    valid = after <= last
    out[valid] = values[after[valid]]
    return out


def merge_intervals(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closed intervals merged into sorted disjoint ones (touching ones merge)."""
    if len(lo) == 0:
        return lo.astype(np.int64), hi.astype(np.int64)
    perm = order(lo, hi)
    lo, hi = lo[perm], hi[perm]
    reach = np.maximum.accumulate(hi)
    new = np.ones(len(lo), dtype=bool)
    new[1:] = lo[1:] > reach[:-1]
    group = np.cumsum(new) - 1
    out_lo = lo[new]
    out_hi = np.full(int(new.sum()), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(out_hi, group, hi)
    return out_lo, out_hi


def covered(points: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """points[i] lies in one of the sorted disjoint closed intervals [lo, hi]."""
    return meets(points, points, lo, hi)


def meets(starts: np.ndarray, ends: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """[starts[i], ends[i]] meets one of the sorted disjoint closed intervals
    [lo, hi]: the last interval starting at or before ends[i] reaches starts[i]."""
    if len(lo) == 0:
        return np.zeros(len(starts), dtype=bool)
    i = np.searchsorted(lo, ends, "right") - 1
    inside = i >= 0
    result = np.zeros(len(starts), dtype=bool)
    result[inside] = starts[inside] <= hi[i[inside]]
    return result


def lists(owner: np.ndarray, values: np.ndarray, n_owners: int, distinct: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Per owner id (0..n_owners-1) the sorted (distinct) values: (offsets, flat values) of a list column."""
    perm = order(owner, values)
    o, v = owner[perm], values[perm]
    if distinct and len(o):
        keep = starts(o, v)
        o, v = o[keep], v[keep]
    counts = np.bincount(o, minlength=n_owners) if len(o) else np.zeros(n_owners, dtype=np.int64)
    offsets = np.zeros(n_owners + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets, v


def bitmaps(owner: np.ndarray, lo: np.ndarray, hi: np.ndarray, n_owners: int, n_bins: int) -> np.ndarray:
    """Per owner id (0..n_owners-1) the bins lo[i]..hi[i] (0 <= lo <= hi < n_bins)
    of its rows, as bits: int64 words (n_owners, n_bins // 64), bin b in
    word b // 64, bit b % 64. Memory: a byte per owner and bin, never per row
    and bin (runs are merged first)."""
    stride = n_bins + 1
    # hi + 1: runs that touch merge, so a run's end mark never meets the next start
    start, stop = merge_intervals(owner * stride + lo, owner * stride + hi + 1)
    marks = np.zeros(n_owners * stride + 1, dtype=np.int8)
    marks[start] = 1
    marks[stop] = -1
    inside = np.cumsum(marks, dtype=np.int8)[:-1].reshape(n_owners, stride)[:, :n_bins] > 0
    return np.packbits(inside, axis=1, bitorder="little").view(np.int64)
