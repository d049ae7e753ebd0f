"""How a librdkafka error maps to a history outcome: the ONE table.

A completion is `ok` only when the client knows the operation happened and
`fail` only when it knows it did not; everything else is `info`. Getting this
wrong invents anomalies (a `fail` that happened looks like an aborted read) or
hides them (an `info` guessed as `fail`), so every decision lives here, with
the reason written next to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from workloads.kafka_client import KafkaError, KafkaException

# Phases of an operation in which an error can surface.
SEND = "send"  # a produce's delivery report (non-transactional)
TXN_BODY = "txn-body"  # inside a transaction, before commit_transaction was called
TXN_COMMIT = "txn-commit"  # commit_transaction raised
INIT = "init"  # init_transactions raised
POLL = "poll"  # consume / poll raised or returned an error
COMMIT = "commit"  # a consumer offset commit


@dataclass(frozen=True)
class Outcome:
    type: str  # "fail" or "info"
    error: str  # short error name for the history
    reason: str  # why this outcome, for people reading the table


# Produce errors that prove the record was never appended: the request was
# refused before any append (or never left the client).
NOT_WRITTEN = {
    "_PURGE_QUEUE": "purged from the client queue before it was sent",
    "_UNKNOWN_PARTITION": "the partition does not exist; nothing was sent",
    "_UNKNOWN_TOPIC": "the topic does not exist; nothing was sent",
    "INVALID_MSG_SIZE": "refused before appending",
    "MSG_SIZE_TOO_LARGE": "refused by the broker before appending",
    "INVALID_RECORD": "refused by the broker before appending",
    "INVALID_MSG": "refused by the broker (corrupt) before appending",
    "TOPIC_AUTHORIZATION_FAILED": "refused: not authorized",
    "CLUSTER_AUTHORIZATION_FAILED": "refused: not authorized",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "refused: not authorized",
    "UNKNOWN_TOPIC_OR_PART": "the broker does not host the partition; not appended",
    "INVALID_REQUIRED_ACKS": "refused before appending",
    "_FENCED": "this producer instance is fenced; the client refuses to send",
    "PRODUCER_FENCED": "a newer instance of the transactional.id fenced this one",
    "INVALID_PRODUCER_EPOCH": "the broker rejected the old producer epoch",
    "TRANSACTION_COORDINATOR_FENCED": "the coordinator was replaced; the request was rejected",
    "_STATE": "the client refused the call in its current state",
}

# Broker rejections of ONE produce attempt. The attempt was not appended, but
# an earlier attempt of the same record (if the client retried after a
# timeout) may have been, so they are definite only without retries.
REJECTED_ATTEMPT = {
    "NOT_ENOUGH_REPLICAS": "the leader refused: fewer in-sync replicas than min.insync.replicas",
    # librdkafka's name for NOT_LEADER_OR_FOLLOWER (code 6)
    "NOT_LEADER_FOR_PARTITION": "the broker is not the leader; not appended",
    "LEADER_NOT_AVAILABLE": "no leader; not appended",
    "KAFKA_STORAGE_ERROR": "the leader could not write; not appended",
    "OUT_OF_ORDER_SEQUENCE_NUMBER": "the idempotent sequence was refused; not appended",
}

# Errors after which nobody can know whether the write happened.
UNKNOWN = {
    "_MSG_TIMED_OUT": "delivery timed out; the record may have been appended",
    "_TIMED_OUT": "the call timed out; the request may have reached the broker",
    "_TIMED_OUT_QUEUE": "timed out in a queue; may or may not have been sent",
    "_TRANSPORT": "the connection broke after the request may have been sent",
    "REQUEST_TIMED_OUT": "the broker timed out waiting; the record may be appended",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": "appended on the leader, not enough replicas acked",
    "NETWORK_EXCEPTION": "the connection broke after the request may have been sent",
    "_PURGE_INFLIGHT": "purged while in flight; the broker may have appended it",
    "_DESTROY": "the client was closed with the request outstanding",
    "_ALL_BROKERS_DOWN": "no broker reachable; a request may already have been sent",
    "COORDINATOR_NOT_AVAILABLE": "the coordinator moved; the request may have been applied",
    "NOT_COORDINATOR": "the coordinator moved; the request may have been applied",
    "COORDINATOR_LOAD_IN_PROGRESS": "the coordinator is loading; outcome unknown",
    "CONCURRENT_TRANSACTIONS": "the coordinator is still finishing a transaction",
}

# Offset commits the group coordinator refused outright.
COMMIT_REJECTED = {
    "REBALANCE_IN_PROGRESS": "the group is rebalancing; the commit was refused",
    "ILLEGAL_GENERATION": "this member's generation is stale; the commit was refused",
    "UNKNOWN_MEMBER_ID": "this member was removed from the group; the commit was refused",
    "FENCED_INSTANCE_ID": "a newer static member fenced this one; the commit was refused",
    "_NO_OFFSET": "nothing to commit; no commit was sent",
    "OFFSET_METADATA_TOO_LARGE": "refused before storing",
    "_ASSIGNMENT_LOST": "the assignment was lost; the commit was refused",
}

FENCING = {"PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "_FENCED", "TRANSACTION_COORDINATOR_FENCED"}


def error_of(exc_or_err) -> KafkaError | None:
    """The KafkaError inside a KafkaException, or the error itself."""
    if isinstance(exc_or_err, KafkaException):
        return exc_or_err.args[0] if exc_or_err.args else None
    if isinstance(exc_or_err, KafkaError):
        return exc_or_err
    return None


def name_of(exc_or_err) -> str:
    """A short error name for the history (`PRODUCER_FENCED`, `_MSG_TIMED_OUT`)."""
    err = error_of(exc_or_err)
    if err is not None:
        return err.name()
    return type(exc_or_err).__name__


def classify(exc_or_err, phase: str, *, retries: bool = True, commit_attempted_before: bool = False) -> Outcome:
    """The outcome of an operation that ended with this error in this phase.

    `retries`: whether the client may have retried the request (produce
    retries > 0, or idempotence); then a rejection of the last attempt does
    not prove an earlier attempt was not appended.
    `commit_attempted_before`: an earlier commit_transaction of the same
    transaction already failed with an unknown outcome; then even a fencing
    error cannot prove the transaction did not commit (the new instance's
    init completes a commit that reached the coordinator).
    """
    err = error_of(exc_or_err)
    name = name_of(exc_or_err)
    if err is None:
        return Outcome("info", name, "not a Kafka error: the client does not know what happened")

    if phase == TXN_BODY:
        # Kafka commits a transaction only on EndTxn(commit), which is sent
        # only by commit_transaction: before it is called, nothing commits.
        return Outcome("fail", name, "transaction aborted before commit was requested")

    if phase == TXN_COMMIT:
        if err.txn_requires_abort():
            return Outcome("fail", name, "the commit was refused; the transaction must abort")
        if name in FENCING and not commit_attempted_before:
            return Outcome("fail", name, NOT_WRITTEN.get(name, "fenced"))
        return Outcome("info", name, "commit_transaction failed; the commit may have been applied")

    if phase == INIT:
        if name in FENCING or name in NOT_WRITTEN:
            return Outcome("fail", name, NOT_WRITTEN.get(name, "refused"))
        # A timed-out InitProducerId may still have bumped the epoch.
        return Outcome("info", name, UNKNOWN.get(name, "init may have bumped the epoch"))

    if phase == COMMIT:
        if name in COMMIT_REJECTED:
            return Outcome("fail", name, COMMIT_REJECTED[name])
        return Outcome("info", name, UNKNOWN.get(name, "the commit may have been stored"))

    if phase == POLL:
        # A failed poll writes nothing; the records it did return are listed.
        return Outcome("fail", name, "the poll failed; reads are listed, nothing was written")

    # SEND
    if name in NOT_WRITTEN:
        return Outcome("fail", name, NOT_WRITTEN[name])
    if name in REJECTED_ATTEMPT:
        if retries:
            return Outcome("info", name, "last attempt refused, an earlier attempt may be appended")
        return Outcome("fail", name, REJECTED_ATTEMPT[name])
    if name in UNKNOWN:
        return Outcome("info", name, UNKNOWN[name])
    if err.fatal():
        return Outcome("info", name, "fatal client error with the record possibly sent")
    return Outcome("info", name, "unclassified error: outcome unknown")


def combine(types: list[str]) -> str:
    """The type of an op of several non-transactional sends.

    All ok -> ok; all fail -> fail; any mix -> info (part may have happened;
    checkers judge such ops send by send).
    """
    if not types:
        return "ok"
    if all(t == "ok" for t in types):
        return "ok"
    if all(t == "fail" for t in types):
        return "fail"
    return "info"
