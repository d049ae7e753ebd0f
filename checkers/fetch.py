"""Brings a query's rows to the driver through Arrow instead of `collect()`.

`collect()` unpickles every row into a Row object in the driver's Python.
The per-key pass's small rows and the cycle search's edges can be tens of
thousands of rows even for a short run (131,254 edge rows for a 60 s demo
run); as Arrow batches turned into dicts they came back in 0.18 s against
0.60 s. The dicts are read by column name, as Rows are.
"""

from __future__ import annotations

from pyspark.sql import DataFrame


def fetch_rows(frame: DataFrame) -> list[dict]:
    """Every row of `frame` as a dict of column name to value (lists for arrays)."""
    return frame.toArrow().to_pylist()
