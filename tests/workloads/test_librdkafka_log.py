"""Reading librdkafka's debug log, on its own lines (a trial of
benchmarks/librdkafka_stale_fetch.py, 2026-11-30, trimmed, in the
benchmark's `time message` format)."""

from workloads.librdkafka_log import fetches_outside_assignment, outdated_offset_retries

T = "stale-5ffe2f40"
TRIAL = [
    f"1796005479.985 SRVPEND [c#consumer-3]: Starting pending assigned partition {T} [2] at offset INVALID",
    f"1796005479.985 SRVPEND [c#consumer-3]: Starting pending assigned partition {T} [1] at offset INVALID",
    f"1796005480.087 FETCH [c#consumer-3]: Partition {T} [1] start fetching at offset 0 (leader epoch 0)",
    f"1796005480.089 REMOVE [c#consumer-3]: Removing {T} [1] from assignment (started=true, wait_stop=true)",
    f"1796005480.090 REMOVE [c#consumer-3]: Removing {T} [2] from assignment (started=true, wait_stop=true)",
    f"1796005480.090 OFFSET [c#consumer-3]: {T} [2]: outdated offset response: (re)starting offset query"
    " timer for offset BEGINNING (leader epoch -1)",
    f"1796005480.097 SRVPEND [c#consumer-3]: Starting pending assigned partition {T} [1] at offset INVALID",
    f"1796005480.097 FETCH [c#consumer-3]: Partition {T} [1] start fetching at offset 0 (leader epoch -1)",
    f"1796005480.592 FETCH [c#consumer-3]: Partition {T} [2] start fetching at offset 0 (leader epoch 0)",
    f"1796005480.600 SRVPEND [c#consumer-3]: Starting pending assigned partition {T} [2] at offset 220",
    f"1796005480.600 FETCH [c#consumer-3]: Partition {T} [2] start fetching at offset 220 (leader epoch -1)",
]


def test_only_a_fetch_between_a_partitions_removal_and_its_return_is_outside_the_assignment():
    found = fetches_outside_assignment(TRIAL)
    assert [(tp, offset) for tp, offset, _ in found] == [((T, 2), 0)]
    assert found[0][2] == TRIAL[8]


def test_a_fetch_of_a_partition_never_assigned_is_outside_the_assignment():
    line = f"1.0 FETCH [c] [thrd:main]: Partition {T} [5] start fetching at offset 7 (leader epoch 0)"
    assert [(tp, offset) for tp, offset, _ in fetches_outside_assignment([line])] == [((T, 5), 7)]


def test_the_outdated_offset_replies_name_their_partitions():
    assert outdated_offset_retries(TRIAL) == {(T, 2)}
    assert outdated_offset_retries(TRIAL[:5]) == set()
