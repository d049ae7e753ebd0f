"""Parsing DumpLogSegments' --deep-iteration --print-data-log output (no lab): the fixtures
are what a 3.9.1 and a 4.4.0 broker printed for one partition holding two idempotent records
(one with a key and an HTML value), a committed transaction of three records and an aborted one
of two (recorded by a 3-node lab with confluent-kafka). tests/lab/test_segments_lab.py dumps a
live lab."""

from pathlib import Path

import pytest

from harness.systems.kafka import segments

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(params=["3.9.1", "4.4.0"])
def dumped(request) -> dict:
    text = (FIXTURES / f"dump_log_segments_{request.param}.txt").read_text()
    files = segments.parse(text)
    assert len(files) == 1
    path, found = next(iter(files.items()))
    assert segments.partition_of(path) == ("ev", 0)
    return found


def test_every_batch_with_its_producer_sequences_and_flags(dumped):
    assert dumped["log_start_offset"] == 0 and dumped["batches_in_file"] == 5
    assert (dumped["first_offset"], dumped["last_offset"]) == (0, 8)
    shape = [
        (
            b["base_offset"],
            b["last_offset"],
            b["count"],
            b["base_sequence"],
            b["last_sequence"],
            b["transactional"],
            b["control"],
            b.get("marker"),
        )
        for b in dumped["batches"]
    ]
    assert shape == [
        (0, 1, 2, 0, 1, False, False, None),
        (2, 4, 3, 0, 2, True, False, None),
        (5, 5, 1, -1, -1, True, True, "COMMIT"),
        (6, 7, 2, 3, 4, True, False, None),
        (8, 8, 1, -1, -1, True, True, "ABORT"),
    ]
    idempotent, *transactional = dumped["batches"]
    assert len({b["producer_id"] for b in transactional}) == 1
    assert idempotent["producer_id"] != transactional[0]["producer_id"]
    assert all(b["producer_epoch"] == 0 for b in dumped["batches"])


def test_records_keep_key_and_value_as_printed_text(dumped):
    first, second = dumped["batches"][0]["records"]
    assert first == {"offset": 0, "sequence": 0, "key": "k 1", "value": "<b>plain</b> one"}
    assert second == {"offset": 1, "sequence": 1, "value": "2"}
    assert [r["value"] for r in dumped["batches"][3]["records"]] == ["20", "21"]
    assert dumped["batches"][4]["records"] == [{"offset": 8, "sequence": -1, "marker": "ABORT", "coordinator_epoch": 0}]


def test_trim_keeps_the_window_and_the_marker_that_ended_each_transaction(dumped):
    batches = dumped["batches"]

    def kept(offsets, window):
        return [(b["base_offset"], b.get("marker")) for b in segments.trim(batches, offsets, window)]

    assert kept([0], 1) == [(0, None)]  # not transactional: no marker
    assert kept([3], 0) == [(2, None), (5, "COMMIT")]
    assert kept([6], 0) == [(6, None), (8, "ABORT")]
    assert kept([5], 1) == [(2, None), (5, "COMMIT"), (6, None), (8, "ABORT")]
    assert segments.ending_marker(batches, batches[2]) is None  # a marker ends nothing


def test_parse_keeps_only_what_keep_asks_for_and_counts_the_rest():
    text = (FIXTURES / "dump_log_segments_3.9.1.txt").read_text()
    found = next(iter(segments.parse(text, segments.near([0], 0)).values()))
    assert [b["base_offset"] for b in found["batches"]] == [0, 5, 8]  # the window and every control batch
    assert found["batches_in_file"] == 5


def test_long_values_and_many_records_are_capped():
    long = "x" * (segments.MAX_TEXT + 50)
    lines = ["Dumping /d/t-3/00000000000000000000.log", "Log starting offset: 0"]
    count = segments.MAX_RECORDS + 5
    lines.append(
        f"baseOffset: 0 lastOffset: {count - 1} count: {count} baseSequence: 0 lastSequence: {count - 1} "
        "producerId: 4 producerEpoch: 1 partitionLeaderEpoch: 0 isTransactional: false isControl: false"
    )
    lines += [
        f"| offset: {i} CreateTime: 1 keySize: -1 valueSize: 250 sequence: {i} headerKeys: [] payload: {long}"
        for i in range(count)
    ]
    batch = segments.parse("\n".join(lines))["/d/t-3/00000000000000000000.log"]["batches"][0]
    assert len(batch["records"]) == segments.MAX_RECORDS and batch["records_left_out"] == 5
    assert batch["records"][0]["value"].endswith(f"... ({len(long)} characters)")
