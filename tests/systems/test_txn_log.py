"""Decoding DumpLogSegments' transaction-log lines of both formats (no lab): the lines
are as a 4.4.0 and a 3.9.1 broker printed them. tests/workloads/test_java_client_lab.py
reads a real lab's log."""

from harness.systems.kafka import install
from harness.systems.kafka.txn_log import merge, parse_dump, summary

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
    assert found == {
        "gregor-run1-txn-0": {"client_transaction_versions": [2], "protocol": 2, "epochs": [3, 3]},
        "gregor-run1-txn-1": {"client_transaction_versions": [], "protocol": 1, "epochs": [0, 0]},
        "gregor-run1-txn-2": {"client_transaction_versions": [], "protocol": 1, "epochs": [0, 0]},
    }


def test_replicas_merge_and_the_run_is_summed_up():
    node1 = parse_dump(V44, "gregor-run1-")
    node2 = parse_dump(V44.replace('":3,', '":5,'), "gregor-run1-")
    merged = merge([node1, node2])
    assert merged["gregor-run1-txn-0"]["epochs"] == [3, 5]
    assert summary(merged)["protocol"] == "v2"
    mixed = summary(merge([node1, parse_dump(V39, "gregor-run1-")]))
    assert mixed["protocol"] == "mixed" and mixed["transactional_ids"] == {"v2": 1, "classic": 1}
    assert summary({})["protocol"] == "none"


def test_dump_log_segments_moved_into_kafka_tools_in_4_3():
    assert install.dump_log_segments("4.2.2") == "kafka.tools.DumpLogSegments"
    assert install.dump_log_segments("4.3.0") == "org.apache.kafka.tools.DumpLogSegments"
    assert not install.needs_tools("3.9.1") and install.needs_tools("4.4.0")
