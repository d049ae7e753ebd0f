"""Java client exceptions -> librdkafka error names: the one table of the Java path.

workloads/outcomes.py decides every outcome (fail or info) from librdkafka's
error NAMES, and stays the one table of history outcomes. The Java client
throws exceptions instead; this module names each one with the name whose
verdict in outcomes.py the facts allow: a name outcomes.py treats as
definite only when the Java client certainly did not write (or commit), an
unknown-outcome name whenever it may have. docs/CLIENTS.md prints the table.

How the driver's report of an exception is named, in order:
1. the exception that tells: the first in the chain that is not a bare
   wrapper (a KafkaException with a cause, e.g. "Cannot execute
   transactional method because we are in an error state" around the error
   the transaction manager stored);
2. a row of CLASS_ROWS, for exceptions of the client itself (no protocol
   error code of their own), where the place it surfaced matters;
3. otherwise its Kafka protocol error code (org.apache.kafka.common.protocol.Errors,
   the numbers librdkafka uses for broker errors) under librdkafka's name
   for that code (NOT_LEADER_OR_FOLLOWER -> NOT_LEADER_FOR_PARTITION, ...);
4. otherwise the Java class name itself: outcomes.py does not know it, so
   every phase but a transaction body or a poll calls it `info`.

The flags come from the client's state, as librdkafka's do: fatal when the
transaction manager is in FATAL_ERROR (or the exception is one the Java
client always treats as fatal: ALWAYS_FATAL), txn_requires_abort in
ABORTABLE_ERROR, retriable when the exception is a RetriableException and
the producer is in neither.
"""

from __future__ import annotations

from dataclasses import dataclass

from workloads.java_client.kafka_types import KafkaError, code_of, name_of

DELIVERY = "delivery"  # a produce's delivery report
CALL = "call"  # a blocking call: init/begin/commit/abort/send_offsets, the consumer's calls
COMMIT = "commit"  # an offset commit's result (commitSync, or an auto commit's callback)
ANY = "any"


@dataclass(frozen=True)
class Row:
    java: str  # the exception's simple class name (or what the row is about)
    where: str  # DELIVERY, CALL, COMMIT or ANY
    name: str  # librdkafka's name, as outcomes.py tables it
    why: str


# Rules about the chain and the producer's state, before the class rows.
DESTROYED = Row(
    "KafkaException (plain), after the facade closed the producer",
    DELIVERY,
    "_DESTROY",
    "purge() closes the Java producer at once; what it still had may have been in flight: unknown",
)
STORED_TIMEOUT = Row(
    "KafkaException around a TimeoutException",
    CALL,
    "_MSG_TIMED_OUT",
    "the transaction manager's stored error of an earlier delivery that timed out (the state says "
    "abortable, so outcomes.py fails the commit: EndTxn(commit) was never sent)",
)

# Exceptions of the client itself (no protocol code of their own, or one that would mislead).
CLASS_ROWS = [
    Row(
        "TimeoutException",
        DELIVERY,
        "_MSG_TIMED_OUT",
        "delivery.timeout.ms expired for the batch, which may have been in flight: unknown, as librdkafka's "
        "_MSG_TIMED_OUT. Also when send() itself waited max.block.ms for metadata (never queued): named the "
        "same, the conservative side",
    ),
    Row(
        "BufferExhaustedException",
        DELIVERY,
        "_QUEUE_FULL",
        "send() waited max.block.ms for buffer memory; never queued, but outcomes.py does not table "
        "_QUEUE_FULL: unknown (conservative)",
    ),
    Row(
        "TimeoutException",
        CALL,
        "_TIMED_OUT",
        "a blocking call ran out of max.block.ms or default.api.timeout.ms; the request may have reached the "
        "broker (InitProducerId, EndTxn, OffsetCommit): unknown; retriable, as librdkafka's",
    ),
    Row("TimeoutException", COMMIT, "_TIMED_OUT", "commitSync gave up; the commit may have been stored: unknown"),
    Row(
        "CommitFailedException",
        ANY,
        "ILLEGAL_GENERATION",
        "the group refused the commit (UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION: Java folds both into this "
        "class, or the member had no generation and sent nothing): definite, as outcomes.py's COMMIT_REJECTED",
    ),
    Row(
        "TransactionAbortedException",
        ANY,
        "_PURGE_QUEUE",
        "a batch that never reached a broker failed because its transaction aborted: never sent",
    ),
    Row(
        "IllegalStateException",
        ANY,
        "_STATE",
        "the client refused the call in its state (send before initTransactions, seek on an unassigned "
        "partition, a producer already closed): nothing was sent",
    ),
    Row(
        "NoOffsetForPartitionException",
        ANY,
        "_AUTO_OFFSET_RESET",
        "no committed offset and auto.offset.reset=none; a read, nothing written",
    ),
    Row("DisconnectException", ANY, "_TRANSPORT", "the connection broke with the request outstanding: unknown"),
    Row("AuthenticationException", ANY, "_AUTHENTICATION", "the client could not authenticate; nothing was accepted"),
    Row("SslAuthenticationException", ANY, "_SSL", "the TLS handshake failed; nothing was accepted"),
    Row("InterruptException", ANY, "_FAIL", "the driver thread was interrupted (never on purpose): unknown"),
]

# Protocol errors the code rule names, listed for docs/CLIENTS.md with their reason; the rule
# itself (code -> librdkafka's name) covers every code. These are the ones runs raise.
CODE_ROWS = [
    (90, "ProducerFencedException", "a newer instance of the transactional.id bumped the epoch: fenced"),
    (47, "InvalidProducerEpochException", "the broker refused the old epoch; nothing appended"),
    (52, "TransactionCoordinatorFencedException", "the coordinator was replaced; refused"),
    (45, "OutOfOrderSequenceException", "the sequence was refused: this attempt not appended, an earlier may be"),
    (19, "NotEnoughReplicasException", "refused before append (retried by the client while time is left)"),
    (20, "NotEnoughReplicasAfterAppendException", "appended on the leader, the ISR too small: unknown"),
    (6, "NotLeaderOrFollowerException", "not the leader: this attempt not appended"),
    (5, "LeaderNotAvailableException", "no leader: this attempt not appended"),
    (56, "KafkaStorageException", "the leader could not write: this attempt not appended"),
    (3, "UnknownTopicOrPartitionException", "the broker does not host it; not appended"),
    (10, "RecordTooLargeException", "refused before append (in send(): never queued)"),
    (2, "CorruptRecordException", "refused before append"),
    (87, "InvalidRecordException", "refused before append"),
    (13, "NetworkException", "the connection broke with the request outstanding: unknown"),
    (15, "CoordinatorNotAvailableException", "the coordinator moved; may have applied: unknown"),
    (16, "NotCoordinatorException", "the coordinator moved; may have applied: unknown"),
    (14, "CoordinatorLoadInProgressException", "loading; unknown"),
    (51, "ConcurrentTransactionsException", "the coordinator is finishing a transaction: unknown"),
    (48, "InvalidTxnStateException", "refused in the coordinator's state; outcomes.py does not table it: unknown"),
    (59, "UnknownProducerIdException", "the partition forgot the producer; the transaction must abort"),
    (49, "InvalidPidMappingException", "the coordinator forgot the transactional id; abort or init again"),
    (120, "TransactionAbortableException", "(protocol v2) the coordinator says: abort this transaction"),
    (27, "RebalanceInProgressException", "the group is rebalancing; the commit was refused"),
    (22, "IllegalGenerationException", "stale generation; the commit was refused"),
    (25, "UnknownMemberIdException", "evicted from the group; the commit was refused"),
    (82, "FencedInstanceIdException", "a newer static member fenced this one; refused; fatal"),
    (29, "TopicAuthorizationException", "refused: not authorized"),
    (31, "ClusterAuthorizationException", "refused: not authorized"),
    (53, "TransactionalIdAuthorizationException", "refused: not authorized"),
    (35, "UnsupportedVersionException", "the broker cannot serve the request: nothing done"),
]

WRAPPERS = {"KafkaException", "ExecutionException", "CompletionException", "SyncSend"}
# Fatal whatever state the transaction manager shows when the call returns: the Java
# client's contract ("the producer must be closed") and librdkafka's (_FENCED is fatal).
ALWAYS_FATAL = {
    "ProducerFencedException",
    "TransactionalIdAuthorizationException",
    "ClusterAuthorizationException",
    "FencedInstanceIdException",
}


def telling(chain: list[dict]) -> tuple[int, dict]:
    """The exception in the chain that says what happened, and its depth."""
    for depth, link in enumerate(chain):
        if link["class"] not in WRAPPERS or depth == len(chain) - 1:
            return depth, link
    return 0, chain[0]


def name_for(report: dict) -> str:
    """librdkafka's name for a driver report (the module's docstring: the order)."""
    depth, link = telling(report["chain"])
    where = report.get("where", CALL)
    if where == DELIVERY and report.get("closing") and link["class"] == "KafkaException":
        return DESTROYED.name
    if link["class"] == "TimeoutException" and where == CALL and depth > 0:
        return STORED_TIMEOUT.name
    for row in CLASS_ROWS:
        if row.java == link["class"] and row.where in (where, ANY):
            return row.name
    code = int(link.get("code", -1))
    if code != -1:
        return name_of(code)
    return link["class"]


def kafka_error(report: dict) -> KafkaError:
    """The KafkaError the facade raises or reports for a driver report."""
    chain = report["chain"]
    name = name_for(report)
    _, link = telling(chain)
    state = report.get("txn_state")
    fatal = state == "FATAL_ERROR" or link["class"] in ALWAYS_FATAL
    abortable = state == "ABORTABLE_ERROR"
    retriable = bool(chain[0].get("retriable") or link.get("retriable")) and not (fatal or abortable)
    code = code_of(name)
    if code is None:  # a Java class (or a protocol code) librdkafka has no name for: the name says which
        code = int(link.get("code", -1)) if int(link.get("code", -1)) != -1 else KafkaError._FAIL
    return KafkaError(
        code,
        f"{link['class']}: {link.get('message')}",
        fatal=fatal,
        retriable=retriable,
        txn_requires_abort=abortable,
        name=name,
        java=report,
    )
