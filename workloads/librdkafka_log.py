"""Reading librdkafka's debug log (the `cgrp`, `consumer`, `topic` and `fetch`
contexts), as the clients keep it in a run's `clients/*.log` or a benchmark
keeps it per trial.

Why: a consumer that starts fetching a partition outside its assignment is
invisible in the history; only librdkafka's own lines show it (README,
"Known limits": such a fetch's records reached a copier after the partition
came back to it at its committed offset).
"""

from __future__ import annotations

import re

FETCH_START = re.compile(r"Partition (\S+) \[(\d+)\] start fetching at offset (\d+)")
PARTITION_ADD = re.compile(r"(?:Starting pending assigned partition|PARTADD\|.*: add) (\S+) \[(\d+)\]")
PARTITION_REMOVE = re.compile(r"Removing (\S+) \[(\d+)\] from assignment")
# A ListOffsets reply for a partition whose fetch was stopped meanwhile: librdkafka
# (2.16.0) sets its offset query timer again, which starts a fetch 500 ms later.
# The reproduced finding these lines can show (docs/findings/), by its name.
STALE_FETCH = "librdkafka-stale-fetch-redelivery"
# The `--consumer-config` whose log shows where each partition's fetch started.
DEBUG = "debug=cgrp,consumer,topic,fetch"
OUTDATED_OFFSET_RETRY = re.compile(r"(\S+) \[(\d+)\]: outdated offset response: \(re\)starting offset query timer")


def fetches_outside_assignment(lines) -> list[tuple[tuple[str, int], int, str]]:
    """((topic, partition), offset, line) of each fetch the consumer of this log
    started for a partition outside its assignment: after librdkafka removed
    the partition from it, before it was added again."""
    found = []
    assigned = set()
    for line in lines:
        if added := PARTITION_ADD.search(line):
            assigned.add((added[1], int(added[2])))
        elif removed := PARTITION_REMOVE.search(line):
            assigned.discard((removed[1], int(removed[2])))
        elif (fetch := FETCH_START.search(line)) and (fetch[1], int(fetch[2])) not in assigned:
            found.append(((fetch[1], int(fetch[2])), int(fetch[3]), line.strip()))
    return found


def outdated_offset_retries(lines) -> set[tuple[str, int]]:
    """The (topic, partition) pairs whose ListOffsets reply came back outdated
    and set the offset query timer again (needs the `topic` debug context)."""
    return {(m[1], int(m[2])) for line in lines if (m := OUTDATED_OFFSET_RETRY.search(line))}


def debug_on(test: dict) -> bool:
    """Whether a run's librdkafka consumers logged their fetches and
    assignments (test.json's `client.consumer_config`), as
    fetches_outside_assignment() needs."""
    client = test.get("client") if isinstance(test.get("client"), dict) else {}
    config = client.get("consumer_config") if isinstance(client.get("consumer_config"), dict) else {}
    contexts = {c.strip() for c in str(config.get("debug", "")).split(",")}
    return {"cgrp", "fetch"} <= contexts or "all" in contexts
