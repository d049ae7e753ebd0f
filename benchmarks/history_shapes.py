"""Synthetic histories in the shapes users produce, each with planted anomalies (benchmarks/bench_shapes.py).

benchmarks/bench_checkers.py generates one shape (single sends and two-key
transactions, consumers that own their keys). A check must hold on the
others too, so each function here writes one more, straight to disk, line
by line, and returns what it planted:

- `queue`: 256 idempotent producers of single sends, 8 consumers;
- `txn`: 8 transactional producers, transactions of 1 to 3 sends of which
  some abort and some end `info` (a new process id and an `init` follow),
  8 consumers, a nemesis pair about every 100,000 events, a final drain;
- `eos`: a feeder and two copier groups (one commits its input positions
  inside its transactions, the other with `commit` ops after them), and a
  verifier reading the outputs;
- `group`: 8 members of one group, subscribed, committing after each poll,
  with a rebalance about every 2,000 events;
- `keys1000`: single sends to 1,000 keys, 8 consumers of 125 keys each;
- `longtxn`: transactions of 100 sends each, consumers reading 100 records a poll.

Values are unique per key, every record that must have happened is read by
the drain, and the only anomalies are the planted ones (their names and
where: `planted`).
"""

from __future__ import annotations

import collections
import json
import random
from pathlib import Path

from ground.faults import PARTITION, kind

MS = 1_000_000


class Writer:
    """Lines with index and time, two ops of different processes in flight at once, per-key logs."""

    def __init__(self, out, keys: int, target: int, seed: int):
        self.out = out
        self.rng = random.Random(seed)
        self.keys = keys
        self.target = target
        self.index = 0
        self.time = 0
        self.next_offset = [0] * keys
        self.next_value = [0] * keys
        self.pending = [collections.deque() for _ in range(keys)]  # (offset, value) not yet read
        self.held: list[tuple[str, str]] = []
        self.planted: dict[str, dict] = {}

    def line(self, body: str) -> None:
        self.time += self.rng.randint(1, 2) * MS // 2
        self.out.write(f'{{"index":{self.index},"time":{self.time},{body}}}\n')
        self.index += 1

    def op(self, invoke: str, completion: str) -> None:
        """Queues an op; two queued ops of different processes are written overlapping."""
        process = invoke.split(",", 1)[0]
        if self.held and self.held[0][0].split(",", 1)[0] == process:
            self.flush()
        self.held.append((invoke, completion))
        if len(self.held) == 2:
            self.flush()

    def flush(self) -> None:
        for invoke, _ in self.held:
            self.line(invoke)
        for _, completion in self.held:
            self.line(completion)
        self.held = []

    def record(self, key: int) -> tuple[int, int]:
        """A new value of `key` at its next offset."""
        self.next_value[key] += 1
        offset = self.next_offset[key]
        self.next_offset[key] += 1
        return offset, self.next_value[key]

    def read(self, keys, batch: int, limit: int | None = None) -> list[tuple[int, int, int]]:
        """(key, offset, value) of up to `batch` unread records per key, in log order."""
        got = []
        for key in keys:
            queue = self.pending[key]
            for _ in range(min(batch, len(queue))):
                offset, value = queue.popleft()
                got.append((key, offset, value))
            if limit is not None and len(got) >= limit:
                break
        return got

    def poll(self, process: int, keys, batch: int, extra: str = "", limit: int | None = None) -> list:
        got = self.read(keys, batch, limit)
        if got:
            mops = ",".join(f'{{"f":"poll","key":{k},"offset":{o},"value":{v}}}' for k, o, v in got)
            self.op(
                f'"process":{process},"type":"invoke","f":"poll"{extra},"mops":[{{"f":"poll"}}]',
                f'"process":{process},"type":"ok","f":"poll"{extra},"mops":[{mops}]',
            )
        return got

    def send(self, process: int, key: int) -> tuple[int, int]:
        offset, value = self.record(key)
        self.pending[key].append((offset, value))
        self.op(
            f'"process":{process},"type":"invoke","f":"send","mops":[{{"f":"send","key":{key},"value":{value}}}]',
            f'"process":{process},"type":"ok","f":"send","mops":[{{"f":"send","key":{key},"value":{value},'
            f'"offset":{offset}}}]',
        )
        return offset, value

    def assign(self, process: int, keys) -> None:
        listed = ",".join(str(k) for k in keys)
        self.op(
            f'"process":{process},"type":"invoke","f":"assign","keys":[{listed}]',
            f'"process":{process},"type":"ok","f":"assign","keys":[{listed}]',
        )

    def budget(self) -> int:
        return self.target - 4 * self.keys

    def drain(self, consumers: dict[int, list[int]], batch: int = 200, extra: str = "") -> None:
        while any([self.poll(process, keys, batch, extra) for process, keys in consumers.items()]):
            pass
        self.flush()

    # ---------------------------------------------------------------- planted anomalies
    def plant_lost(self, key: int, process: int) -> None:
        """A send no consumer ever reads, below later reads: lost-write."""
        offset, value = self.send(process, key)
        self.pending[key].remove((offset, value))
        self.planted["lost-write"] = {"key": key, "value": value}

    def plant_duplicate(self, key: int, process: int) -> None:
        """The broker wrote one send twice: the value at a second offset."""
        offset, value = self.send(process, key)
        second = self.next_offset[key]
        self.next_offset[key] += 1
        self.pending[key].append((second, value))
        self.planted["duplicate"] = {"key": key, "value": value}

    def plant_nonmonotonic(self, process: int, key: int, first: tuple[int, int]) -> None:
        """A later poll returns the key's first record again."""
        offset, value = first
        self.op(
            f'"process":{process},"type":"invoke","f":"poll","mops":[{{"f":"poll"}}]',
            f'"process":{process},"type":"ok","f":"poll","mops":[{{"f":"poll","key":{key},"offset":{offset},'
            f'"value":{value}}}]',
        )
        self.planted["nonmonotonic-poll"] = {"key": key, "value": value}

    def plant_cycle(self, key_a: int, key_b: int, p1: int, p2: int, txn_ids=("x", "y")) -> None:
        """Two transactions, each reading the other's write: G1c."""
        self.flush()
        (oa, va), (ob, vb) = self.record(key_a), self.record(key_b)
        self.next_offset[key_a] += 1
        self.next_offset[key_b] += 1
        self.pending[key_a].append((oa, va))
        self.pending[key_b].append((ob, vb))
        first = self.index
        self.line(
            f'"process":{p1},"type":"invoke","f":"txn","txn_id":"{txn_ids[0]}","mops":[{{"f":"send","key":{key_a},'
            f'"value":{va}}},{{"f":"poll"}}]'
        )
        self.line(
            f'"process":{p2},"type":"invoke","f":"txn","txn_id":"{txn_ids[1]}","mops":[{{"f":"send","key":{key_b},'
            f'"value":{vb}}},{{"f":"poll"}}]'
        )
        self.line(
            f'"process":{p1},"type":"ok","f":"txn","txn_id":"{txn_ids[0]}","mops":[{{"f":"send","key":{key_a},'
            f'"value":{va},"offset":{oa}}},{{"f":"poll","key":{key_b},"offset":{ob},"value":{vb}}}]'
        )
        self.line(
            f'"process":{p2},"type":"ok","f":"txn","txn_id":"{txn_ids[1]}","mops":[{{"f":"send","key":{key_b},'
            f'"value":{vb},"offset":{ob}}},{{"f":"poll","key":{key_a},"offset":{oa},"value":{va}}}]'
        )
        self.planted["G1c"] = {"ops": [first + 2, first + 3]}


def _test(name: str, workload: str, keys: int, **client) -> dict:
    return {
        "name": f"bench-shape-{name}",
        "system": "synthetic",
        "workload": workload,
        "keys": {str(k): [f"t{k // 64}", k % 64] for k in range(keys)},
        "client": {
            "acks": "all",
            "enable.idempotence": True,
            "isolation.level": "read_committed",
            "transactional": False,
            "auto.commit": False,
            "subscribe": False,
            **client,
        },
        "broker": {"min.insync.replicas": 2, "unclean.leader.election.enable": False, "replication.factor": 3},
        "drain": {"complete": True},
    }


def _own_keys(consumers: int, keys: int, base: int) -> dict[int, list[int]]:
    return {base + c: list(range(c, keys, consumers)) for c in range(consumers)}


# -------------------------------------------------------------------- the shapes


def queue(w: Writer) -> dict:
    producers, consumers = 256, _own_keys(8, w.keys, 1000)
    for process, keys in consumers.items():
        w.assign(process, keys)
    first_read = None
    step = 0
    while w.index < w.budget():
        step += 1
        if step == 3000:
            w.plant_lost(1, w.rng.randrange(producers))
        elif step == 4000:
            w.plant_duplicate(2, w.rng.randrange(producers))
        elif step == 6000 and first_read:
            w.plant_nonmonotonic(1000 + 4 % 8, 4, first_read)
        elif w.rng.random() < 0.5:
            w.send(w.rng.randrange(producers), w.rng.randrange(w.keys))
        else:
            process = w.rng.choice(list(consumers))
            got = w.poll(process, consumers[process], 4)
            if first_read is None and process == 1004:
                first_read = next(((o, v) for k, o, v in got if k == 4), None)
    w.drain(consumers)
    return _test("queue", "queue", w.keys)


def txn(w: Writer) -> dict:
    """The shape of issue 42: info and aborted transactions, re-inits, nemesis pairs."""
    producers, concurrency = 8, 16
    consumers = _own_keys(8, w.keys, 100)
    process = list(range(producers))  # current process id of each producer
    epoch = [0] * producers
    for p in range(producers):
        _init(w, p, p, 0)
    for pid, keys in consumers.items():
        w.assign(pid, keys)
    step, faults = 0, 0
    while w.index < w.budget():
        step += 1
        if w.index // 100_000 > faults:
            faults += 1
            _nemesis_pair(w, faults)
        producer = w.rng.randrange(producers)
        roll = w.rng.random()
        if step == 2000:
            _txn(w, process[producer], producer, epoch[producer], [1], "ok", lose=True)
        elif step == 3000:
            _txn(w, process[producer], producer, epoch[producer], [3], "fail", read_aborted=True)
        elif step == 4000:
            _txn(w, process[producer], producer, epoch[producer], [5, 6], "ok", tear=True)
        elif step == 5000:
            w.plant_cycle(7, 8, 900, 901)
        elif roll < 0.42:
            keys = w.rng.sample(range(w.keys), w.rng.randint(1, 3))
            outcome = "ok" if w.rng.random() < 0.9 else ("fail" if w.rng.random() < 0.5 else "info")
            _txn(w, process[producer], producer, epoch[producer], keys, outcome)
            if outcome == "info":  # the client crashed: a new process, a new instance
                process[producer] += concurrency
                epoch[producer] += 1
                _init(w, process[producer], producer, epoch[producer])
        else:
            pid = w.rng.choice(list(consumers))
            w.poll(pid, consumers[pid], 4)
    w.drain(consumers)
    return _test("txn", "txn", w.keys, transactional=True, **{"transaction.timeout.ms": 600000})


def _init(w: Writer, process: int, producer: int, epoch: int) -> None:
    w.op(
        f'"process":{process},"type":"invoke","f":"init","txn_id":"tx-{producer}","mops":[]',
        f'"process":{process},"type":"ok","f":"init","txn_id":"tx-{producer}","producer_id":{producer},'
        f'"epoch":{epoch},"mops":[]',
    )


def _nemesis_pair(w: Writer, n: int) -> None:
    w.flush()
    node = f"n{n % 3 + 1}"
    partition = kind(PARTITION)
    for f in (partition.start, partition.heal):
        value = json.dumps({"nodes": [node], "clients": []}, separators=(",", ":"))
        w.line(f'"process":"nemesis","type":"invoke","f":"{f}","value":{value}')
        w.line(f'"process":"nemesis","type":"info","f":"{f}","value":{value}')


def _txn(w, process, producer, epoch, keys, outcome, lose=False, read_aborted=False, tear=False) -> None:
    """One transaction of `keys` ending `outcome`. An aborted one's records
    take offsets no consumer returns; an `info` one committed or not at random.
    Planted: its first write lost (`lose`), its records read although it
    aborted (`read_aborted`), its second write never read (`tear`)."""
    sends_in, sends_done = [], []
    committed = outcome == "ok" or (outcome == "info" and w.rng.random() < 0.5)
    for n, key in enumerate(keys):
        offset, value = w.record(key)
        if committed or read_aborted:
            w.pending[key].append((offset, value))
        if lose and n == 0:
            w.pending[key].pop()
            w.planted["lost-write"] = {"key": key, "value": value}
        if read_aborted and n == 0:
            w.planted["aborted-read"] = {"key": key, "value": value}
        if tear and n == 1:
            w.pending[key].pop()
            w.planted["torn-transaction"] = {"key": key, "value": value}
        sends_in.append(f'{{"f":"send","key":{key},"value":{value}}}')
        known = f',"offset":{offset}' if outcome != "info" else ""
        sends_done.append(f'{{"f":"send","key":{key},"value":{value}{known}}}')
    for key in set(keys):
        w.next_offset[key] += 1  # the commit or abort marker
    head = f'"process":{process},"f":"txn","txn_id":"tx-{producer}"'
    done = {
        "ok": f',"producer_id":{producer},"epoch":{epoch},"commit_time":{w.time}',
        "fail": ',"error":"ABORTED"',
        "info": ',"error":"_MSG_TIMED_OUT"',
    }[outcome]
    w.op(
        f'{head},"type":"invoke","mops":[{",".join(sends_in)}]',
        f'{head},"type":"{outcome}"{done},"mops":[{",".join(sends_done)}]',
    )


def eos(w: Writer) -> dict:
    """Inputs 0..7, outputs 8..15 (input K -> K + 8). Copiers of group `in-txn`
    take inputs 0..3 and commit inside their transactions; those of `ops`
    take 4..7 and commit with a `commit` op after each transaction."""
    half = w.keys // 2
    feeders = (0, 1)
    copiers = {10: ("in-txn", [0, 1]), 11: ("in-txn", [2, 3]), 12: ("ops", [4, 5]), 13: ("ops", [6, 7])}
    verifier = {20: list(range(half, w.keys))}
    w.assign(20, verifier[20])
    copied_once: tuple | None = None
    step = 0
    while w.index < w.budget():
        step += 1
        roll = w.rng.random()
        if roll < 0.35:
            w.send(w.rng.choice(feeders), w.rng.randrange(half))
        elif roll < 0.8:
            process = w.rng.choice(list(copiers))
            group, keys = copiers[process]
            if step > 3000 and "eos-duplicate" not in w.planted and group == "in-txn" and copied_once:
                _copy(w, process, group, [], half, again=copied_once)
                w.planted["eos-duplicate"] = {"key": copied_once[0], "value": copied_once[2]}
                continue
            got = w.read(keys, 4)
            if got:
                skip = step > 4000 and "eos-lost" not in w.planted and group == "ops"
                first = _copy(w, process, group, got, half, skip_first=skip)
                if skip:
                    w.planted["eos-lost"] = {"key": got[0][0], "value": got[0][2]}
                if copied_once is None and group == "in-txn":
                    copied_once = first
        else:
            w.poll(20, verifier[20], 8)
    for process, (group, keys) in copiers.items():  # the copiers catch up, then the verifier drains
        while got := w.read(keys, 50):
            _copy(w, process, group, got, half)
    w.drain(verifier)
    return _test("eos", "eos", w.keys, transactional=True, **{"transaction.timeout.ms": 600000})


def _copy(w: Writer, process: int, group: str, got: list, shift: int, skip_first=False, again=None):
    """A copier's poll op, its output transaction (commit mops inside it for
    `in-txn`), and for `ops` a `commit` op after it. `again`: copy that one
    input record once more (its position already committed: eos-duplicate)."""
    g = f',"group":"{group}"'
    if again is None:
        polls = ",".join(f'{{"f":"poll","key":{k},"offset":{o},"value":{v}}}' for k, o, v in got)
        w.op(
            f'"process":{process},"type":"invoke","f":"poll"{g},"mops":[{{"f":"poll"}}]',
            f'"process":{process},"type":"ok","f":"poll"{g},"mops":[{polls}]',
        )
    sources = [again] if again is not None else got[1:] if skip_first else got
    sends_in, sends_done = [], []
    for key, _offset, value in sources:
        out = key + shift
        offset, out_value = w.record(out)
        w.pending[out].append((offset, out_value))
        source = f'"from":[{key},{value}]'
        sends_in.append(f'{{"f":"send","key":{out},"value":{out_value},{source}}}')
        sends_done.append(f'{{"f":"send","key":{out},"value":{out_value},{source},"offset":{offset}}}')
    for out in {key + shift for key, _o, _v in sources}:
        w.next_offset[out] += 1  # the commit marker
    commits = []
    if again is None:
        positions: dict[int, int] = {}
        for key, offset, _value in got:
            positions[key] = max(positions.get(key, 0), offset + 1)
        commits = [f'{{"f":"commit","key":{k},"offset":{o}}}' for k, o in sorted(positions.items())]
    inside = commits if group == "in-txn" else []
    head = f'"process":{process},"f":"txn","txn_id":"copier-{process}"{g}'
    w.op(
        f'{head},"type":"invoke","mops":[{",".join(sends_in + inside)}]',
        f'{head},"type":"ok","producer_id":{process},"epoch":0,"commit_time":{w.time},'
        f'"mops":[{",".join(sends_done + inside)}]',
    )
    if group != "in-txn" and commits:
        w.op(
            f'"process":{process},"type":"invoke","f":"commit"{g},"mops":[{",".join(commits)}]',
            f'"process":{process},"type":"ok","f":"commit"{g},"mops":[{",".join(commits)}]',
        )
    return got[0] if got else None


def group(w: Writer) -> dict:
    producers = 8
    members = list(range(100, 108))
    assignment = _own_keys(len(members), w.keys, 100)
    g = ',"group":"g"'
    all_keys = ",".join(str(k) for k in range(w.keys))
    for member in members:
        w.op(
            f'"process":{member},"type":"invoke","f":"subscribe"{g},"keys":[{all_keys}]',
            f'"process":{member},"type":"ok","f":"subscribe"{g},"keys":[{all_keys}]',
        )
    moved: dict[int, str] = {}
    rebalances = 0
    while w.index < w.budget():
        if w.index // 2000 > rebalances:
            rebalances += 1
            shift = w.rng.randrange(1, len(members))
            new = {m: assignment[members[(i + shift) % len(members)]] for i, m in enumerate(members)}
            for m in members:
                revoked = ",".join(map(str, assignment[m]))
                assigned = ",".join(map(str, new[m]))
                moved[m] = (
                    f',"rebalance":[{{"type":"revoked","keys":[{revoked}]}},{{"type":"assigned","keys":[{assigned}]}}]'
                )
            assignment = new
        if w.rng.random() < 0.5:
            w.send(w.rng.randrange(producers), w.rng.randrange(w.keys))
            continue
        member = w.rng.choice(members)
        skip = rebalances >= 3 and "offset-commit-loss" not in w.planted and w.pending[9] and 9 in assignment[member]
        if skip:  # the member commits past a record it never read
            offset, value = w.pending[9].popleft()
            w.planted["offset-commit-loss"] = {"key": 9, "value": value}
        got = w.read(assignment[member], 4)
        if skip and not any(k == 9 for k, _o, _v in got):
            got.append((9, offset, None))
        if got:
            polls = ",".join(f'{{"f":"poll","key":{k},"offset":{o},"value":{v}}}' for k, o, v in got if v is not None)
            extra = moved.pop(member, "")
            w.op(
                f'"process":{member},"type":"invoke","f":"poll"{g},"mops":[{{"f":"poll"}}]',
                f'"process":{member},"type":"ok","f":"poll"{g}{extra},"mops":[{polls}]',
            )
            positions: dict[int, int] = {}
            for key, offset, _value in got:
                positions[key] = max(positions.get(key, 0), offset + 1)
            commits = ",".join(f'{{"f":"commit","key":{k},"offset":{o}}}' for k, o in sorted(positions.items()))
            w.op(
                f'"process":{member},"type":"invoke","f":"commit"{g},"mops":[{commits}]',
                f'"process":{member},"type":"ok","f":"commit"{g},"mops":[{commits}]',
            )
        if rebalances == 5 and "duplicate" not in w.planted:
            w.plant_duplicate(2, w.rng.randrange(producers))
    consumers = {m: assignment[m] for m in members}
    w.drain(consumers, extra=g)
    return _test("group", "group", w.keys, subscribe=True)


def keys1000(w: Writer) -> dict:
    producers = 16
    consumers = _own_keys(8, w.keys, 5000)
    for process, keys in consumers.items():
        w.assign(process, keys)
    cursor = {process: 0 for process in consumers}
    first_read = None
    step = 0
    while w.index < w.budget():
        step += 1
        if step == 3000:
            w.plant_lost(1, 0)
        elif step == 4000:
            w.plant_duplicate(2, 0)
        elif step == 9000 and first_read:
            w.plant_nonmonotonic(5004, 4, first_read)
        elif w.rng.random() < 0.5:
            w.send(w.rng.randrange(producers), w.rng.randrange(w.keys))
        else:
            process = w.rng.choice(list(consumers))
            keys = consumers[process]
            start = cursor[process]
            cursor[process] = (start + 16) % len(keys)
            got = w.poll(process, keys[start:] + keys[:start], 2, limit=16)
            if first_read is None and process == 5004:
                first_read = next(((o, v) for k, o, v in got if k == 4), None)
    w.drain(consumers)
    return _test("keys1000", "queue", w.keys)


def longtxn(w: Writer) -> dict:
    producers = 4
    consumers = _own_keys(8, w.keys, 100)
    for process, keys in consumers.items():
        w.assign(process, keys)
    for p in range(producers):
        _init(w, p, p, 0)
    step = 0
    while w.index < w.budget():
        step += 1
        producer = w.rng.randrange(producers)
        if step == 200:
            _txn(w, producer, producer, 0, [1] + [w.rng.randrange(10, w.keys) for _ in range(99)], "ok", lose=True)
        elif step == 300:
            _txn(w, producer, producer, 0, [3], "fail", read_aborted=True)
        elif step == 400:
            w.plant_cycle(7, 8, 900, 901)
        elif w.rng.random() < 0.35:
            keys = [w.rng.randrange(w.keys) for _ in range(100)]
            _txn(w, producer, producer, 0, keys, "ok" if w.rng.random() < 0.95 else "fail")
        else:
            pid = w.rng.choice(list(consumers))
            w.poll(pid, consumers[pid], 13)
    w.drain(consumers)
    return _test("longtxn", "txn", w.keys, transactional=True, **{"transaction.timeout.ms": 600000})


SHAPES = {
    "queue": (queue, 64),
    "txn": (txn, 64),
    "eos": (eos, 16),
    "group": (group, 64),
    "keys1000": (keys1000, 1000),
    "longtxn": (longtxn, 64),
}


def generate(shape: str, directory: Path, events: int, seed: int = 7) -> dict:
    """Writes DIR/history.jsonl and DIR/test.json of about `events` events; returns events and planted."""
    make, keys = SHAPES[shape]
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "history.jsonl", "w", buffering=1 << 20) as out:
        w = Writer(out, keys, events, seed)
        test = make(w)
        w.flush()
    (directory / "test.json").write_text(json.dumps(dict(test, seed=seed)))
    return {"events": w.index, "planted": w.planted}
