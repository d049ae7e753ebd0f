"""The faults bite: with acks=1, killing partition leaders loses writes the
brokers acknowledged: the final drain reads each key past their offsets and
never returns them.

The lab detects a dead broker after 3 s (instead of 9 s) so every kill,
held 4-12 s, ends in an election, and followers fetch at most every 400 ms,
so a leader always holds acknowledged records no follower has yet: the
window acks=1 leaves open. Both are ordinary broker settings; the loss is
Kafka's acks=1 contract, not something the test makes up.
"""

import pytest
from nemesis_lab_helpers import gregor_run, lost_below_read_bound, unread_acked_writes

pytestmark = pytest.mark.lab

LAB_OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "1000",
    "replica.fetch.wait.max.ms": "400",
    "replica.fetch.min.bytes": "1048576",
}


@pytest.mark.first_backend_only
def test_acks_1_with_leader_kills_loses_acknowledged_writes(lab, tmp_path):
    run_dir, history, test = gregor_run(
        lab,
        tmp_path,
        "--workload",
        "queue",
        "--acks",
        "1",
        "--idempotence",
        "false",
        "--batch",
        "20",
        "--rate",
        "500",
        "--keys",
        "4",
        "--nemesis",
        "kill",
        "--nemesis-targets",
        "leader",
        "--nemesis-interval",
        "8",
        "--time-limit",
        "30",
        "--seed",
        "2",
        "--drain-time-limit",
        "20",
    )
    kills = [
        e
        for e in history
        if e.get("process") == "nemesis" and e["type"] == "info" and e["f"] == "kill" and e["value"].get("killed")
    ]
    assert kills and all(e["value"]["role"].startswith("leader:") for e in kills)
    unread = unread_acked_writes(history)
    lost = lost_below_read_bound(history)
    print(
        f"{len(kills)} leader kills: {len(unread)} acknowledged writes never read, "
        f"{len(lost)} of them below offsets the drain read past"
    )
    assert lost and lost <= unread
