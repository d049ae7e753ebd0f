"""The catalogue's reproductions, end to end, one run per side: the unsafe
side shows the finding, the safe side none, and the history itself shows the
mechanism behind it (docs/SCENARIOS.md, "Reproductions").

abort-sequence-reuse runs both sides on Kafka 3.9.1; delayed-endtxn runs its
unsafe side on 3.9.1 with librdkafka and its safe side on 4.4.0 (formatted
with transaction.version=2) with Kafka's Java client 4.4.0; duplicate-produce
runs on the newest release; late-produce runs both sides on 3.9.1, its unsafe
side's brokers with transaction.partition.verification.enable=false: six labs
in all. The catalogue's 20 s are
duplicate-produce's; a scripted run ends with its script, however long
that takes (workloads/script.py LONGEST_S).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from backend_params import lab_name

pytestmark = pytest.mark.lab

CLAIMS = ("abort-sequence-reuse", "delayed-endtxn", "duplicate-produce", "late-produce")
VERIFICATION = "transaction.partition.verification.enable"


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory):
    store = tmp_path_factory.mktemp("repro") / "store"
    root = Path(__file__).resolve().parents[2]
    argv = [sys.executable, "-m", "harness.cli", "scenarios", "--only", ",".join(CLAIMS), "--runs", "1"]
    argv += ["--seed", "1", "--time-limit", "20", "--lab", lab_name("rep"), "--store", str(store)]
    result = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    directory = next((store / "scenarios").iterdir())
    summary = json.loads((directory / "scenarios.json").read_text())
    return {c["name"]: c for c in summary["claims"]}, directory


def run_of(catalogue, name: str, side: str):
    claims, directory = catalogue
    run = claims[name]["sides"][side]["runs"][0]
    assert run["error"] is None, run["error"]
    run_dir = (directory / run["report"]).parent
    history = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines() if line.strip()]
    test = json.loads((run_dir / "test.json").read_text())
    # the run ended its own relay (its final counts are recorded as it is swept)
    assert "error" not in test["wire_relay"]["final"], test["wire_relay"]["final"]
    assert test["wire_relay"]["final"]["desync"] == 0
    return run, history, test


def evidence_of(catalogue, name: str, side: str) -> tuple[dict, str]:
    """The run's evidence/segments.json (the brokers' batches) and its report's HTML."""
    claims, directory = catalogue
    run_dir = (directory / claims[name]["sides"][side]["runs"][0]["report"]).parent
    return json.loads((run_dir / "evidence" / "segments.json").read_text()), (run_dir / "report.html").read_text()


def replica_batches(evidence: dict) -> list:
    """Every replica's batches of the run's one partition (each node's, as dumped)."""
    found = []
    for node in evidence["nodes"].values():
        for replica in node["replicas"].values():
            found.append(replica["batches"])
    return found


def transactions(history: list) -> list:
    return [e for e in history if e.get("f") == "txn" and e["type"] != "invoke"]


def brokers_say(catalogue, name: str, side: str, setting: str) -> set:
    """The values of a broker setting as each broker of the run logged its config at start."""
    claims, directory = catalogue
    run_dir = (directory / claims[name]["sides"][side]["runs"][0]["report"]).parent
    said = set()
    for log in (run_dir / "nodes").glob("*/broker.log"):
        said |= {
            line.split("=", 1)[1].strip()
            for line in log.read_text().splitlines()
            if line.strip().startswith(f"{setting} =")
        }
    return said


def polled(history: list) -> list:
    """Every record the run's consumers read, as (offset, value)."""
    polls = [e for e in history if e.get("f") == "poll" and e["type"] == "ok"]
    return [(m.get("offset"), m.get("value")) for e in polls for m in e["mops"]]


def heals(history: list) -> list:
    return [e["value"] for e in history if e.get("f") == "stop-wire" and e["type"] == "info"]


def test_abort_sequence_reuse_loses_the_committed_write_at_the_aborted_records_offset(catalogue):
    run, history, _ = run_of(catalogue, "abort-sequence-reuse", "unsafe")
    assert run["detected"], run["anomalies"]
    first, aborted, last = transactions(history)
    assert (first["type"], aborted["type"], last["type"]) == ("ok", "fail", "ok")
    dropped = heals(history)[0]["requests"]
    assert dropped and all(r["api"] == "Produce" and r["response_dropped"] for r in dropped)
    # every dropped answer said where the broker put the aborted record; all carried one batch
    answered = {p["base_offset"] for r in dropped for p in r["answer"]["partitions"]}
    sequences = {(b["producer_id"], b["epoch"], b["base_sequence"]) for r in dropped for b in r["batches"]}
    assert len(answered) == 1 and len(sequences) == 1
    (offset,) = answered
    # the next transaction's record was acknowledged at that same offset, and never read
    assert last["mops"][0]["offset"] == offset
    lost = run["anomalies"].get("unseen") or run["anomalies"].get("lost-write")
    assert lost and lost["count"] == 1
    reads = [m for e in history if e.get("f") == "poll" and e["type"] == "ok" for m in e.get("mops") or []]
    assert last["mops"][0]["value"] not in {m.get("value") for m in reads}
    # the brokers' own log: at that offset, the aborted record of the same producer and epoch
    evidence, report = evidence_of(catalogue, "abort-sequence-reuse", "unsafe")
    (shown,) = evidence["known_findings"]
    assert (shown["value"], shown["offset"]) == (last["mops"][0]["value"], offset)
    assert (shown["producer_id"], shown["producer_epoch"]) == (last["producer_id"], last["epoch"])
    assert "known-finding" in report and "librdkafka-abort-sequence-reuse" in report


def test_abort_sequence_reuse_with_a_new_instance_keeps_the_write(catalogue):
    run, history, _ = run_of(catalogue, "abort-sequence-reuse", "safe")
    assert run["clean"], run["bad"]
    inits = [e for e in history if e.get("f") == "init" and e["type"] == "ok"]
    assert len(inits) == 2 and inits[1]["epoch"] > inits[0]["epoch"]
    dropped = heals(history)[0]["requests"]
    (offset,) = {p["base_offset"] for r in dropped for p in r["answer"]["partitions"]}
    last = transactions(history)[-1]
    assert last["type"] == "ok" and last["mops"][0]["offset"] > offset


def test_delayed_endtxn_commits_half_of_the_next_transaction_under_the_classic_protocol(catalogue):
    run, history, test = run_of(catalogue, "delayed-endtxn", "unsafe")
    assert (test["version"], test["client"]["library"]) == ("3.9.1", "librdkafka")
    assert test["transaction_protocol"]["protocol"] == "classic"
    assert run["detected"], run["anomalies"]
    held = heals(history)[0]["requests"]
    assert [(r["api"], r["committed"], r["answer"]["error"]) for r in held] == [("EndTxn", True, 0)]
    torn = transactions(history)[-1]
    assert torn["type"] == "fail" and torn["error"] == "INVALID_TXN_STATE"
    read = run["anomalies"]["aborted-read"]
    assert read["count"] == 1  # the torn transaction's first record, committed by the late EndTxn
    # the brokers' own log: that record's transaction ended with a COMMIT marker
    offset = torn["mops"][0]["offset"]
    evidence, report = evidence_of(catalogue, "delayed-endtxn", "unsafe")
    for batches in replica_batches(evidence):
        (holding,) = [b for b in batches if b["base_offset"] <= offset <= b["last_offset"]]
        ending = [b for b in batches if b.get("control") and b["base_offset"] > offset]
        assert holding["producer_id"] == torn["producer_id"] and ending[0]["marker"] == "COMMIT"
    assert 'class="batches"' in report


def test_delayed_endtxn_is_refused_under_protocol_v2(catalogue):
    run, history, test = run_of(catalogue, "delayed-endtxn", "safe")
    assert (test["version"], test["client"]["library"]) == ("4.4.0", "java")
    assert run["clean"], run["bad"]
    held = heals(history)[0]["requests"]
    assert held[0]["api"] == "EndTxn" and held[0]["version"] >= 5  # protocol v2's EndTxn
    assert held[0]["answer"]["error"] != 0  # its epoch is an old one by the time it lands
    epochs = [t["epoch"] for t in transactions(history)]
    assert epochs == sorted(epochs) and len(set(epochs)) == len(epochs)  # one epoch per transaction
    assert all(t["type"] == "ok" for t in transactions(history))
    assert test["transaction_protocol"]["protocol"] == "v2"  # as the brokers' transaction log says


def test_a_produce_request_sent_twice_is_written_twice_only_without_idempotence(catalogue):
    unsafe, history, _ = run_of(catalogue, "duplicate-produce", "unsafe")
    assert unsafe["detected"], unsafe["anomalies"]
    sent_twice = [r for heal in heals(history) for r in heal["requests"]]
    assert sent_twice and all(r["api"] == "Produce" for r in sent_twice)
    safe, history, _ = run_of(catalogue, "duplicate-produce", "safe")
    assert safe["clean"], safe["bad"]
    assert [r for heal in heals(history) for r in heal["requests"]], "the safe side's rule took no request"


def test_a_produce_delivered_after_its_transactions_abort_is_committed_by_the_next_epochs_marker(catalogue):
    run, history, test = run_of(catalogue, "late-produce", "unsafe")
    assert test["version"] == "3.9.1" and test["broker_config"][VERIFICATION] == "false"
    assert brokers_say(catalogue, "late-produce", "unsafe", VERIFICATION) == {"false"}
    assert run["detected"], run["anomalies"]
    first, aborted, last = transactions(history)
    assert (first["type"], aborted["type"], last["type"]) == ("ok", "fail", "ok")
    # every Produce of the aborted transaction was held, and appended when it finally arrived
    held = heals(history)[0]["requests"]
    assert held and all(r["api"] == "Produce" for r in held)
    batches = {(b["producer_id"], b["epoch"], b["base_sequence"]) for r in held for b in r["batches"]}
    assert batches == {(aborted["producer_id"], aborted["epoch"], 1)}  # the aborted transaction's, after the first's 0
    (offset,) = {p["base_offset"] for r in held for p in r["answer"]["partitions"]}
    assert all(p["error"] == 0 for r in held for p in r["answer"]["partitions"])
    # a new instance (a later epoch) committed the next record after it; the aborted value was read
    assert last["producer_id"] == aborted["producer_id"] and last["epoch"] > aborted["epoch"]
    assert last["mops"][0]["offset"] > offset
    assert run["anomalies"]["aborted-read"]["count"] == 1
    assert (offset, aborted["mops"][0]["value"]) in polled(history)
    # the brokers' own log: the ABORT marker, then the late batch (same producer, epoch and sequence),
    # then the next epoch's record and the COMMIT marker that ended both
    evidence, report = evidence_of(catalogue, "late-produce", "unsafe")
    for log in replica_batches(evidence):
        (late,) = [b for b in log if b["base_offset"] <= offset <= b["last_offset"]]
        assert not late["control"] and late["transactional"]
        assert (late["producer_id"], late["producer_epoch"], late["base_sequence"]) == (
            aborted["producer_id"],
            aborted["epoch"],
            1,
        )
        before = [b for b in log if b["control"] and b["base_offset"] < offset]
        assert before[-1]["marker"] == "ABORT" and before[-1]["producer_epoch"] == aborted["epoch"]
        after = [b for b in log if b["control"] and b["base_offset"] > offset]
        assert after[0]["marker"] == "COMMIT" and after[0]["producer_epoch"] == last["epoch"]
        assert after[0]["base_offset"] > last["mops"][0]["offset"]
    assert 'class="batches"' in report


def test_a_produce_delivered_after_its_transactions_abort_is_refused_with_partition_verification(catalogue):
    run, history, test = run_of(catalogue, "late-produce", "safe")
    assert test["version"] == "3.9.1" and VERIFICATION not in test["broker_config"]  # Kafka's default: on
    assert brokers_say(catalogue, "late-produce", "safe", VERIFICATION) == {"true"}
    assert run["clean"], run["bad"]
    first, aborted, last = transactions(history)
    assert (first["type"], aborted["type"], last["type"]) == ("ok", "fail", "ok")
    held = heals(history)[0]["requests"]
    assert held and all(r["api"] == "Produce" for r in held)
    answers = [p for r in held for p in r["answer"]["partitions"]]
    assert all(p["error"] != 0 and p["base_offset"] == -1 for p in answers)  # refused, appended nowhere
    # nothing came between the aborted transaction's marker and the next record: the first
    # record, its COMMIT marker, the ABORT marker, then the next transaction's record
    assert last["mops"][0]["offset"] == first["mops"][0]["offset"] + 3
    reads = {value for _, value in polled(history)}
    assert aborted["mops"][0]["value"] not in reads and last["mops"][0]["value"] in reads
