"""Safety anomalies of one partition (docs/ANOMALIES.md, the first seven rows of its first table).

inconsistent-offsets, duplicate, lost-write, unseen, aborted-read,
uncommitted-read, precommitted-read: all found by the per-key pass
(checkers/keypass.py), which builds each key's log once for every one of them.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from checkers import passes
from checkers.load import Tables

NAMES = (
    "inconsistent-offsets",
    "duplicate",
    "lost-write",
    "unseen",
    "aborted-read",
    "uncommitted-read",
    "precommitted-read",
)


def find(t: Tables) -> DataFrame:
    return passes.anomalies(passes.main(t), NAMES)
