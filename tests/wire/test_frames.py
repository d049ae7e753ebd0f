"""The frame parser on bytes real clients and brokers sent (tests/wire/recorded, made with the prototype of issue 41).

No lab needed. Each recording is a JSON line per frame of the APIs the parser
reads (and their responses), from librdkafka, from franz-go with its versions
capped at older Kafka releases, and from brokers to brokers.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path

import pytest

from harness.wire import frames as kf
from harness.wire.streams import FrameReader

RECORDED = Path(__file__).parent / "recorded"
CLASSIC_AND_FLEXIBLE = {
    kf.PRODUCE,
    kf.INIT_PRODUCER_ID,
    kf.ADD_PARTITIONS_TO_TXN,
    kf.ADD_OFFSETS_TO_TXN,
    kf.END_TXN,
    kf.TXN_OFFSET_COMMIT,
}
TOPIC = "wire-rec"
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS
RETRIABLE = {14, 15, 16, 51}


def recordings() -> list[Path]:
    return sorted(RECORDED.glob("kafka-*/*.jsonl"))


def load(path: Path) -> list[dict]:
    frames = []
    for line in path.open():
        record = json.loads(line)
        record["bytes"] = bytes.fromhex(record["hex"])
        frames.append(record)
    return frames


def requests_of(path: Path) -> list[tuple[dict, kf.Request]]:
    return [(r, kf.parse_request(r["bytes"])) for r in load(path) if r["dir"] == "request"]


def responses_by_request(path: Path) -> dict[tuple[int, int], dict]:
    """(link, correlation id) -> the parsed response."""
    out = {}
    for record in load(path):
        if record["dir"] == "response":
            key = (record["link"], kf.response_correlation(record["bytes"]))
            out[key] = kf.parse_response(record["bytes"], record["api_key"], record["version"])
    return out


def test_there_are_recordings():
    assert len(recordings()) >= 8, recordings()


@pytest.mark.parametrize("path", recordings(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_recorded_frame_parses(path):
    for record in load(path):
        if record["dir"] == "request":
            request = kf.parse_request(record["bytes"])
            assert request.parse_error is None, (record["api_key"], record["version"], request.parse_error)
            assert (request.api_key, request.api_version) == (record["api_key"], record["version"])
            assert request.size == len(record["bytes"]) - 4
        else:
            answer = kf.parse_response(record["bytes"], record["api_key"], record["version"])
            assert "parse_error" not in answer, (record["api_key"], record["version"], answer)
            assert answer  # every API recorded has something to report


def test_recordings_hold_classic_and_flexible_versions_of_each_api():
    seen = defaultdict(set)
    for path in recordings():
        for record in load(path):
            seen[record["api_key"]].add(record["version"])
    for key in CLASSIC_AND_FLEXIBLE:
        flexible = {v for v in seen[key] if kf.is_flexible(key, v)}
        classic = seen[key] - flexible
        assert classic and flexible, (kf.api_name(key), sorted(seen[key]))
    assert seen[kf.WRITE_TXN_MARKERS]
    assert {v for v in seen[kf.ADD_PARTITIONS_TO_TXN] if v >= 4}, "no batched (broker) AddPartitionsToTxn"


def client_recordings() -> list[Path]:
    return [p for p in recordings() if not p.stem.startswith("broker-")]


@pytest.mark.parametrize("path", client_recordings(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_what_clients_sent_reads_back_as_their_transactions(path):
    """Per transactional id: the producer id and epoch the broker granted are those of every later request;
    its batches are transactional with sequences counting up record by record; it committed, then aborted."""
    answers = responses_by_request(path)
    granted, by_txn = {}, defaultdict(list)
    for record, request in requests_of(path):
        if request.transactional_ids and request.transactional_ids[0] is not None:
            by_txn[request.transactional_ids[0]].append((record, request))
    transactional = [t for t in by_txn if t.startswith("rec-")]
    assert len(transactional) >= 2
    for txn in transactional:
        sequences = defaultdict(list)
        ends = []
        for record, request in by_txn[txn]:
            answer = answers.get((record["link"], request.correlation_id))
            if request.api_key == kf.INIT_PRODUCER_ID:
                assert answer is not None
                if answer["error"] in RETRIABLE:  # the client asks again
                    continue
                assert answer["error"] == 0
                granted[txn] = (answer["producer_id"], answer["epoch"])
                continue
            producer_id, epoch = granted[txn]
            assert {(b.producer_id, b.epoch) for b in request.producers} == {(producer_id, epoch)}
            if request.api_key == kf.PRODUCE:
                assert request.acks == -1
                for batch in request.producers:
                    assert batch.transactional and not batch.control and batch.topic == TOPIC
                    sequences[batch.partition].append((batch.base_sequence, batch.records))
                for part in answer["partitions"]:
                    assert part["error"] == 0 and part["base_offset"] >= 0
            elif request.api_key == kf.END_TXN:
                ends.append(request.details["committed"])
            elif request.api_key == kf.ADD_PARTITIONS_TO_TXN:
                assert {(b.topic, b.partition) for b in request.producers} <= {(TOPIC, p) for p in range(3)}
            elif request.api_key in (kf.TXN_OFFSET_COMMIT, kf.ADD_OFFSETS_TO_TXN):
                assert request.details["group"] == f"g-{txn}"
        assert ends == [True, False], (txn, ends)
        assert sum(count for p in sequences.values() for _, count in p) == 3 * 3 + 1
        for batches in sequences.values():
            expected = 0
            for base, count in batches:
                assert base == expected  # no gap, no reuse
                expected += count


@pytest.mark.parametrize("path", client_recordings(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_produce_with_acks_0_gets_no_response(path):
    answers = responses_by_request(path)
    zero = [(r, q) for r, q in requests_of(path) if q.api_key == kf.PRODUCE and q.acks == 0]
    assert zero, "no acks=0 Produce recorded"
    for record, request in zero:
        assert not request.expects_response
        assert (record["link"], request.correlation_id) not in answers
        assert all(batch.producer_id == -1 for batch in request.producers)


def test_what_brokers_sent_names_the_clients_producers():
    client_producers = set()
    for path in client_recordings():
        for record in load(path):
            if record["dir"] == "response" and record["api_key"] == kf.INIT_PRODUCER_ID:
                client_producers.add(
                    kf.parse_response(record["bytes"], kf.INIT_PRODUCER_ID, record["version"])["producer_id"]
                )
    markers = verifications = 0
    for path in recordings():
        if not path.stem.startswith("broker-"):
            continue
        for _, request in requests_of(path):
            if request.api_key == kf.WRITE_TXN_MARKERS:
                markers += 1
                assert request.producer_ids <= client_producers
                assert all(isinstance(flag, bool) for flag in request.details["committed"])
            elif request.api_key == kf.ADD_PARTITIONS_TO_TXN:
                verifications += 1
                assert request.api_version >= 4 and all(request.details["verify_only"])
                assert all(t.startswith("rec-") for t in request.transactional_ids)
                assert request.producer_ids <= client_producers
    assert markers and verifications


def test_frames_cut_the_same_whatever_the_chunks():
    path = next(p for p in client_recordings())
    frames = [r["bytes"] for r in load(path)[:60]]
    stream = b"".join(frames)
    rng = random.Random(7)
    reader, out, at = FrameReader(), [], 0
    while at < len(stream):
        step = rng.choice([1, 2, 3, 5, 64, 700, 5000])
        out += [bytes(f) for f in reader.feed(stream[at : at + step])]
        at += step
    assert out == frames
    assert reader.have == 0


def test_a_truncated_body_is_reported_not_raised():
    record = next(
        r for p in client_recordings() for r in load(p) if r["dir"] == "request" and r["api_key"] == kf.END_TXN
    )
    cut = record["bytes"][:-3]
    request = kf.parse_request(cut)
    assert request.api_key == kf.END_TXN and request.parse_error
    with pytest.raises(kf.FrameError):
        kf.parse_request(record["bytes"][:9])  # not even a whole header


def test_tls_and_garbage_are_not_kafka_frames():
    with pytest.raises(kf.FrameError):
        kf.frame_size(b"\x16\x03\x01\x02")  # a TLS ClientHello's first bytes
    with pytest.raises(kf.FrameError):
        kf.frame_size(b"\xff\xff\xff\xff")
    assert kf.frame_size(b"\x00\x00\x00\x10") == 16


def test_api_names_and_keys():
    assert kf.api_key_of("endtxn") == kf.END_TXN == kf.api_key_of(26) == kf.api_key_of("26")
    with pytest.raises(ValueError, match="unknown Kafka API"):
        kf.api_key_of("Teleport")


def test_the_fast_path_reads_headers_as_the_full_parser_does():
    """With no rule in place the relay reads only quick_header; it must agree with parse_request."""
    checked = 0
    for path in recordings():
        for record in load(path):
            if record["dir"] == "request":
                full = kf.parse_request(record["bytes"])
                assert kf.quick_header(record["bytes"]) == (
                    full.api_key,
                    full.api_version,
                    full.correlation_id,
                    full.expects_response,
                )
                checked += 1
    assert checked > 300
