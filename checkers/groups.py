"""Consumer-group offset-commit loss: the group committed past a record none of its members read.

Per key (checkers/keypass.py): a record is a value that must have happened,
placed at its first offset in the log; the group's committed position is
the highest offset of its `ok` commits of the key; reads of `fail`/`info`
ops do not count (docs/ANOMALIES.md).
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from checkers import passes
from checkers.load import Tables

NAMES = ("offset-commit-loss",)


def find(t: Tables) -> DataFrame:
    return passes.anomalies(passes.main(t), NAMES)
