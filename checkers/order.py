"""Order anomalies of consumers and producers (docs/ANOMALIES.md, the poll/send family).

A read sits at the log index of the offset it was read at; a send at the
index of its own offset, or where the log shows its value when its
acknowledgement carried no offset. Successive reads (sends) of one process
and key are compared; resets (assign/subscribe ops, rebalance entries) cut
the sequence into segments never compared across. Found by the per-key pass
(checkers/keypass.py).
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from checkers import passes
from checkers.load import Tables

NAMES = (
    "poll-skip",
    "nonmonotonic-poll",
    "int-poll-skip",
    "int-nonmonotonic-poll",
    "nonmonotonic-send",
    "int-send-skip",
    "int-nonmonotonic-send",
)


def find(t: Tables) -> DataFrame:
    return passes.anomalies(passes.main(t), NAMES)
