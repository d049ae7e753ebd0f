"""One plain sentence per anomaly name, for readers who never read docs/ANOMALIES.md.

The sentences say what went wrong in the reader's terms (a record, a
consumer, a transaction), not in the checker's terms (indices, edges).
"""

from __future__ import annotations

SENTENCES: dict[str, str] = {
    "lost-write": (
        "A record the broker acknowledged was never read by any consumer, although consumers read past its place in "
        "the log: it is gone."
    ),
    "unseen": "A record the broker acknowledged was never read by anyone by the end of the run.",
    "inconsistent-offsets": "Two consumers saw different records at the same offset of the same partition.",
    "duplicate": "One record was written to the log more than once, at different offsets.",
    "aborted-read": "A consumer read a record whose write definitely failed or whose transaction was aborted.",
    "uncommitted-read": "A consumer read a record of a transaction before that transaction committed.",
    "precommitted-read": "An operation read back a record it had itself written inside the same operation.",
    "poll-skip": "A consumer jumped over records: two successive reads of a partition were not adjacent in the log.",
    "nonmonotonic-poll": "A consumer went backwards: it read a record at or before one it had already read.",
    "int-poll-skip": "Within a single poll, a consumer jumped over records of a partition.",
    "int-nonmonotonic-poll": "Within a single poll, a consumer went backwards in a partition.",
    "nonmonotonic-send": "A producer's later acknowledged record landed at or before its earlier one in the log.",
    "int-send-skip": "Records sent together in one operation are not next to each other in the log.",
    "int-nonmonotonic-send": "Records sent together in one operation landed in the log out of order.",
    "G0": "Transactions overwrote each other in a cycle: the log orders their writes inconsistently (write cycle).",
    "G0-process": "A write cycle between transactions that also involves one process's own order of operations.",
    "G0-realtime": "A write cycle between transactions that also involves the real-time order of operations.",
    "G1c": "Transactions read each other's writes in a cycle, which no serial order can explain.",
    "G1c-process": (
        "Transactions read each other's writes in a cycle that includes one process's own order of operations."
    ),
    "G1c-realtime": "Transactions read each other's writes in a cycle that includes real-time order.",
    "G1c-ww": (
        "A cycle of reads and log order between transactions, which Kafka allows because it orders a transaction's "
        "writes when produced, not when committed."
    ),
    "G1c-ww-process": "Like G1c-ww, with one process's order of operations in the cycle.",
    "G1c-ww-realtime": "Like G1c-ww, with real-time order in the cycle.",
    "torn-transaction": (
        "A committed transaction was only partly visible: some of its records were read and others never."
    ),
    "zombie-write": (
        "A fenced (older) instance of a transactional producer still committed records after a newer instance took "
        "over."
    ),
    "eos-duplicate": "Exactly-once copying produced two or more outputs from one input record.",
    "eos-lost": "Exactly-once copying committed past an input record but never produced its output.",
    "offset-commit-loss": "A consumer group committed past a record that none of its members read.",
    "cycle-search-incomplete": (
        "Not an anomaly: the cycle search skipped a family that could make the run invalid, because its graph was too "
        "large; the verdict is at best unknown."
    ),
    "permitted-cycle-search-incomplete": (
        "Not an anomaly: the cycle search skipped only families this configuration always permits (G0, G1c-ww), "
        "because their graph was too large; the verdict does not depend on them."
    ),
    "stuck-lso": "A read_committed consumer waited longer than the transaction timeout to see an acknowledged record.",
}


def explain(name: str) -> str:
    """The sentence for ``name``; a neutral one for names this version does not know."""
    return SENTENCES.get(name, f"The checker reported '{name}', an anomaly this report version has no description for.")


def known_names() -> list[str]:
    """Every anomaly name with a sentence, in a stable order (for JUnit test cases)."""
    return list(SENTENCES)
