"""Time buckets of the stats' series (checkers/stats.py) and of the lag rows the per-key pass emits.

The pass (checkers/passes.py) needs the lag bucket before the stats are
computed, so the rule that sizes the buckets lives below both.
"""

from __future__ import annotations

import math

MAX_BUCKETS = 600
MAX_LAG_ROWS = 20000
NICE_STEPS = (1, 2, 5)


def bucket_seconds(duration_s: float, max_buckets: int = MAX_BUCKETS) -> float:
    """The smallest 1-2-5 step (>= 0.1 s) giving at most `max_buckets` buckets."""
    if duration_s <= 0:
        return 1.0
    target = duration_s / max_buckets
    if target <= 0.1:
        return 0.1
    exponent = math.floor(math.log10(target))
    for exp in (exponent, exponent + 1):
        for step in NICE_STEPS:
            size = step * 10.0**exp
            if size >= target:
                return round(size, 6)
    return round(10.0 ** (exponent + 1), 6)


def lag_bucket_seconds(duration_s: float, keys: int) -> float:
    """One lag row per bucket and key: coarser buckets when there are many keys."""
    return max(bucket_seconds(duration_s), bucket_seconds(duration_s, max(1, MAX_LAG_ROWS // max(1, keys))))
