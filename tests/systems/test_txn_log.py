"""Decoding DumpLogSegments' transaction-log lines of both formats (no lab): the lines
are as 4.4.0, 4.3.0, 4.0.2 and 3.9.1 brokers printed them. tests/workloads/test_java_client_lab.py
reads a real lab's log."""

from harness.systems.kafka import install
from harness.systems.kafka.txn_log import classic_only, merge, parse_dump, summary

V44 = (
    "| offset: 8 CreateTime: 1795897353212 keySize: 13 valueSize: 58 sequence: -1 headerKeys: [] "
    'key: {"type":"0","data":{"transactionalId":"gregor-run1-txn-0"}} payload: {"version":"1","data":'
    '{"producerId":0,"previousProducerId":0,"producerEpoch":3,"transactionTimeoutMs":10000,'
    '"transactionStatus":"PrepareCommit","transactionPartitions":[{"topic":"jx","partitionIds":[0]}],'
    '"transactionLastUpdateTimestampMs":1795897353211,"transactionStartTimestampMs":1795897353198,'
    '"clientTransactionVersion":2}}'
)
V44_CLASSIC = V44.replace(',"clientTransactionVersion":2', "").replace("txn-0", "txn-1").replace('":3,', '":0,')
V39 = (
    "| offset: 14 CreateTime: 1795899628389 keySize: 25 valueSize: 37 sequence: -1 headerKeys: [] "
    "key: transaction_metadata::transactionalId=gregor-run1-txn-2 payload: producerId:2002,producerEpoch:0,"
    "state=CompleteCommit,partitions=[],txnLastUpdateTimestamp=1795899628379,txnTimeoutMs=10000"
)
OTHER_RUN = V44.replace("gregor-run1-", "gregor-run0-")
BATCH = "baseOffset: 8 lastOffset: 8 count: 1 baseSequence: -1 producerId: -1 producerEpoch: -1 isTransactional: false"


def test_both_formats_decode_per_transactional_id_of_the_run():
    found = parse_dump("\n".join([BATCH, V44, V44_CLASSIC, BATCH, V39, OTHER_RUN]), "gregor-run1-")
    assert {txn_id: (e["client_transaction_versions"], e["protocol"], e["epochs"]) for txn_id, e in found.items()} == {
        "gregor-run1-txn-0": ([2], 2, [3, 3]),
        "gregor-run1-txn-1": ([], 1, [0, 0]),  # the JSON decoder prints the field: its absence is classic
        "gregor-run1-txn-2": ([], None, [0, 0]),  # the text decoder cannot print it, and no commit shows
    }


def text_record(offset: int, epoch: int, state: str, txn_id: str = "gregor-run2-txn-0") -> str:
    """A record as 4.0.2's text decoder printed it (tests/systems: the probe of 2026-11-29)."""
    return (
        f"| offset: {offset} CreateTime: 1795944448668 keySize: 32 valueSize: 69 sequence: -1 headerKeys: [] "
        f"key: transaction_metadata::transactionalId={txn_id} payload: producerId:0,producerEpoch:{epoch},"
        f"state={state},partitions=[g-t0-2],txnLastUpdateTimestamp=1795944448667,txnTimeoutMs=10000"
    )


def json_record(offset: int, epoch: int, status: int, version: str = "") -> str:
    """A record as 4.3.0's JSON decoder printed it: the status as a number."""
    return (
        f"| offset: {offset} CreateTime: 1795944478006 keySize: 32 valueSize: 79 sequence: -1 headerKeys: [] "
        'key: {"type":"0","data":{"transactionalId":"gregor-run2-txn-0"}} payload: {"version":"1","data":'
        f'{{"producerId":0,"previousProducerId":0,"producerEpoch":{epoch},"transactionTimeoutMs":10000,'
        f'"transactionStatus":{status},"transactionPartitions":[],"transactionLastUpdateTimestampMs":1,'
        f'"transactionStartTimestampMs":1{version}}}}}'
    )


def text_log(*steps: str) -> list[str]:
    """Records of one id in log order, each step "epoch:state"."""
    return [text_record(i, int(step.split(":")[0]), step.split(":")[1]) for i, step in enumerate(steps)]


# protocol v2 on 4.0.2: each commit names the epoch above the transaction's own
V2_TEXT = text_log("0:Empty", "0:Ongoing", "1:PrepareCommit", "1:CompleteCommit", "1:Ongoing", "2:PrepareCommit")
# classic: commits keep the epoch; an init (Empty) and a timed-out abort bump it
CLASSIC_TEXT = text_log(
    "0:Empty",
    "0:Ongoing",
    "0:PrepareCommit",
    "0:CompleteCommit",
    "0:Ongoing",
    "1:PrepareAbort",
    "1:CompleteAbort",
    "2:Empty",
    "2:Ongoing",
    "2:PrepareCommit",
)


def test_the_text_decoder_tells_v2_by_the_epoch_bumped_at_each_commit():
    v2 = parse_dump("\n".join(["Dumping /d/__transaction_state-4/0.log", *V2_TEXT]))["gregor-run2-txn-0"]
    assert (v2["protocol"], v2["commits"], v2["commit_bumps"], v2["printed_version"]) == (2, 2, 2, False)
    classic = parse_dump("\n".join(CLASSIC_TEXT))["gregor-run2-txn-0"]
    assert (classic["protocol"], classic["commits"], classic["commit_bumps"]) == (1, 2, 0)
    never_committed = parse_dump("\n".join(CLASSIC_TEXT[:2]))["gregor-run2-txn-0"]
    assert never_committed["protocol"] is None
    assert summary(parse_dump("\n".join(CLASSIC_TEXT[:2])))["protocol"] == "unknown"


def test_epochs_are_compared_within_one_segment_file_only():
    """Another file's records (another partition, or a replica) are no predecessor."""
    split = ["Dumping /d/a.log", *V2_TEXT[:2], "Dumping /d/b.log", V2_TEXT[2]]
    assert parse_dump("\n".join(split))["gregor-run2-txn-0"]["commit_bumps"] == 0


def test_the_json_decoder_status_may_be_a_number():
    records = [
        json_record(0, 0, 1, ',"clientTransactionVersion":2'),
        json_record(1, 1, 2, ',"clientTransactionVersion":2'),
    ]
    entry = parse_dump("\n".join(records))["gregor-run2-txn-0"]
    assert (entry["protocol"], entry["commits"], entry["commit_bumps"]) == (2, 1, 1)
    plain = parse_dump("\n".join([json_record(0, 0, 1), json_record(1, 0, 4)]))["gregor-run2-txn-0"]
    assert (plain["protocol"], plain["commits"]) == (1, 0)  # CompleteCommit (4) is no PrepareCommit


def test_a_version_on_the_coordinators_own_records_is_not_the_clients():
    """On 4.3.1 and 4.4.0 with transaction.version 2, librdkafka's ids had a 2 on records the
    coordinator wrote on its own (an abort) while their commits carried none: classic."""
    v2 = ',"clientTransactionVersion":2'
    records = [json_record(0, 0, 1), json_record(1, 0, 2), json_record(2, 1, 3, v2), json_record(3, 1, 5, v2)]
    entry = parse_dump("\n".join(records))["gregor-run2-txn-0"]
    assert (entry["client_transaction_versions"], entry["commits"], entry["protocol"]) == ([], 1, 1)
    named = parse_dump(V44.replace('"PrepareAbort"', "").replace('"PrepareCommit"', '"PrepareAbort"'))
    assert named["gregor-run1-txn-0"]["protocol"] == 1  # a named status, as 4.4.0 printed it


def test_a_broker_before_4_0_has_only_the_classic_protocol():
    unplaced = parse_dump("\n".join(CLASSIC_TEXT[:2]))
    assert summary(classic_only(unplaced))["protocol"] == "classic"


def test_replicas_merge_and_the_run_is_summed_up():
    node1 = parse_dump(V44, "gregor-run1-")
    node2 = parse_dump(V44.replace('":3,', '":5,'), "gregor-run1-")
    merged = merge([node1, node2])
    assert merged["gregor-run1-txn-0"]["epochs"] == [3, 5]
    assert summary(merged)["protocol"] == "v2"
    classic = parse_dump(V44_CLASSIC.replace("txn-1", "txn-2"), "gregor-run1-")
    mixed = summary(merge([node1, classic]))
    assert mixed["protocol"] == "mixed" and mixed["transactional_ids"] == {"v2": 1, "classic": 1, "unknown": 0}
    replicas = merge([parse_dump("\n".join(V2_TEXT)), parse_dump("\n".join(V2_TEXT[:3]))])
    assert replicas["gregor-run2-txn-0"]["commits"] == 2  # the same records twice: the larger count, not the sum
    assert summary({})["protocol"] == "none"


def test_dump_log_segments_moved_into_kafka_tools_in_4_3():
    assert install.dump_log_segments("4.2.2") == "kafka.tools.DumpLogSegments"
    assert install.dump_log_segments("4.3.0") == "org.apache.kafka.tools.DumpLogSegments"
    assert not install.needs_tools("3.9.1") and install.needs_tools("4.4.0")
