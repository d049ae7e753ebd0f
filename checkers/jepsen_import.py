"""Import of a history.edn from Jepsen's Kafka workload into our format.

Why: users can then run Gregor's checkers and Jepsen's on the same data and
compare. Jepsen's shapes (jepsen.tests.kafka):

- client ops `{:type :invoke|:ok|:fail|:info, :f :send|:poll|:txn, :process
  P, :time NS, :index I, :value [mop ...]}` with mops `[:send k v]` on invoke,
  `[:send k [offset v]]` on completion (offset nil when unknown), `[:poll]` on
  invoke and `[:poll {k [[offset v] ...]}]` on completion;
- `:assign` / `:subscribe` with `:value [k ...]`; `:crash`;
- an optional `:rebalance-log`, either `[{:type :revoked, :keys [...]}]` or
  `{:before [...] :during [...]}`;
- nemesis ops with `:process :nemesis`, where Jepsen marks both the start
  and the end `:info`: we pair them into our invoke + info completion.

Jepsen keys are integers already; key K maps to `["jepsen", K]` in test.json.
The file is streamed, so a history larger than memory imports fine.
"""

from __future__ import annotations

import json
import os
from typing import Any

from checkers import edn
from checkers.edn import Keyword
from ground.errors import GregorError

CLIENT_FS = {"send", "poll", "txn", "assign", "subscribe", "crash"}
TYPES = {"invoke", "ok", "fail", "info"}

NOTE = (
    "Imported from a Jepsen history.edn. Jepsen's history does not record "
    "the client or broker settings, so `client` and `broker` are "
    "assumptions (transactional/subscribe inferred from the ops seen, "
    "the strictest settings otherwise): every anomaly counts as bad "
    "unless you pass the real settings."
)


def _name(value: Any) -> Any:
    return value.name if isinstance(value, (Keyword, edn.Symbol)) else value


def to_json(value: Any) -> Any:
    """EDN data as plain JSON data (keywords become their names)."""
    if isinstance(value, (Keyword, edn.Symbol)):
        return value.name
    if isinstance(value, dict):
        return {
            str(to_json(k)) if not isinstance(to_json(k), str) else to_json(k): to_json(v) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((to_json(v) for v in value), key=repr)
    if isinstance(value, edn.Tagged):
        return {"tag": value.tag, "value": to_json(value.value)}
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return str(value)


class _Importer:
    def __init__(self, path: str):
        self.path = path
        self.keys: set[int] = set()
        self.index = 0
        self.last_time = 0
        self.nemesis_open = False
        self.skipped: dict[str, int] = {}
        self.saw_txn = False
        self.saw_subscribe = False

    def _fail(self, op: dict, problem: str) -> GregorError:
        where = op.get(Keyword("index"), "?")
        return GregorError(f"{self.path}: Jepsen op :index {where}: {problem}")

    def _key(self, op: dict, key: Any) -> int:
        if not isinstance(key, int) or isinstance(key, bool):
            raise self._fail(op, f"key {edn.dumps(key)} is not an integer, so it is not a Kafka workload history")
        self.keys.add(key)
        return key

    def _int(self, op: dict, value: Any, what: str) -> int | None:
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._fail(op, f"{what} {edn.dumps(value)} is not an integer")
        return value

    def _skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def convert(self, op: Any) -> dict | None:
        """One Jepsen op map -> one of our events (None: not representable)."""
        if not isinstance(op, dict):
            raise GregorError(
                f"{self.path}: expected Jepsen op maps, found {edn.dumps(op)[:60]}; is this a Jepsen history?"
            )

        def get(name, default=None):
            return op.get(Keyword(name), default)

        process = _name(get("process"))
        f = _name(get("f"))
        jtype = _name(get("type"))
        if jtype not in TYPES or f is None:
            raise self._fail(op, "missing :type or :f; is this a Jepsen history?")
        time = get("time")
        time = self.last_time if not isinstance(time, int) else time
        self.last_time = time
        event: dict[str, Any] = {"index": None, "time": time}
        if get("index") is not None:
            event["jepsen_index"] = get("index")
        if process == "nemesis":
            event.update(process="nemesis", f=str(f))
            # Jepsen logs both halves of a fault as :info; the first opens it.
            event["type"] = "info" if self.nemesis_open else "invoke"
            self.nemesis_open = not self.nemesis_open
            value = to_json(get("value"))
            if value is not None:
                event["value"] = value if isinstance(value, dict) else {"value": value}
            return event
        if not isinstance(process, int) or isinstance(process, bool):
            self._skip(f"process {process!r}")
            return None
        if f not in CLIENT_FS:
            self._skip(f"f {f}")
            return None
        event.update(process=process, type=jtype, f=f)
        if get("error") is not None:
            error = get("error")
            event["error"] = _name(error) if isinstance(error, (Keyword, str)) else edn.dumps(error)[:200]
        value = get("value")
        if f in ("assign", "subscribe"):
            self.saw_subscribe |= f == "subscribe"
            event["keys"] = [self._key(op, k) for k in (value or [])]
        elif f in ("send", "poll", "txn"):
            self.saw_txn |= f == "txn"
            event["mops"] = self._mops(op, value or [])
            rebalance = self._rebalance(op, get("rebalance-log"))
            if rebalance and jtype != "invoke":
                event["rebalance"] = rebalance
        return event

    def _mops(self, op: dict, value: list) -> list[dict]:
        mops: list[dict] = []
        for poll_number, mop in enumerate(value):
            if not isinstance(mop, (list, tuple)) or not mop:
                raise self._fail(op, f"micro-op {edn.dumps(mop)} is not a vector")
            mf = _name(mop[0])
            if mf == "send":
                if len(mop) != 3:
                    raise self._fail(op, f"send {edn.dumps(mop)} needs a key and value")
                key = self._key(op, mop[1])
                sent = mop[2]
                if isinstance(sent, (list, tuple)):
                    offset, v = (list(sent) + [None, None])[:2]
                    out = {"f": "send", "key": key, "value": self._int(op, v, "value")}
                    if offset is not None:
                        out["offset"] = self._int(op, offset, "offset")
                else:
                    out = {"f": "send", "key": key, "value": self._int(op, sent, "value")}
                mops.append(out)
            elif mf == "poll":
                if len(mop) < 2 or mop[1] is None:
                    mops.append({"f": "poll"})
                    continue
                if not isinstance(mop[1], dict):
                    raise self._fail(op, f"poll result {edn.dumps(mop[1])[:60]} is not a map")
                for key, pairs in mop[1].items():
                    key = self._key(op, key)
                    for pair in pairs or []:
                        offset, v = (list(pair) + [None, None])[:2]
                        if v is None:
                            self._skip("poll record without a value")
                            continue
                        mops.append(
                            {
                                "f": "poll",
                                "key": key,
                                "offset": self._int(op, offset, "offset"),
                                "value": self._int(op, v, "value"),
                                "poll": poll_number,
                            }
                        )
            else:
                raise self._fail(op, f"unknown micro-op {edn.dumps(mop)[:60]}")
        return mops

    def _rebalance(self, op: dict, log: Any) -> list[dict]:
        if not log:
            return []
        if isinstance(log, dict):
            log = list(log.get(Keyword("before")) or []) + list(log.get(Keyword("during")) or [])
        out = []
        for entry in log:
            if not isinstance(entry, dict):
                continue
            kind = _name(entry.get(Keyword("type")))
            keys = [self._key(op, k) for k in entry.get(Keyword("keys")) or []]
            if kind in ("revoked", "assigned", "lost"):
                out.append({"type": "revoked" if kind == "lost" else kind, "keys": keys})
        return out


def jepsen_to_history(
    edn_path: str,
    out_dir: str,
    *,
    client: dict | None = None,
    broker: dict | None = None,
    drain_complete: bool = True,
    name: str | None = None,
) -> dict:
    """Writes out_dir/history.jsonl and out_dir/test.json; returns test.json.

    `client` and `broker` override the assumed settings (see NOTE).
    `drain_complete` says whether the Jepsen run ended with final polls of
    every key (Jepsen's Kafka workload does by default).
    """
    if not os.path.isfile(edn_path):
        raise GregorError(f"{edn_path}: no such file; give the path of a Jepsen history.edn")
    os.makedirs(out_dir, exist_ok=True)
    importer = _Importer(edn_path)
    history_path = os.path.join(out_dir, "history.jsonl")
    tmp_path = history_path + ".tmp"
    try:
        with open(tmp_path, "w", encoding="utf-8") as out:
            for op in edn.iter_history(edn_path):
                event = importer.convert(op)
                if event is None:
                    continue
                event["index"] = importer.index
                importer.index += 1
                out.write(json.dumps(event, separators=(",", ":")) + "\n")
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise
    if importer.index == 0:
        os.remove(tmp_path)
        raise GregorError(f"{edn_path}: no Kafka workload ops found; is this a history.edn of Jepsen's Kafka test?")
    os.replace(tmp_path, history_path)
    test = {
        "name": name or "jepsen-import",
        "system": "jepsen-import",
        "workload": "txn" if importer.saw_txn else "queue",
        "keys": {str(k): ["jepsen", k] for k in sorted(importer.keys)},
        "client": {
            "acks": "all",
            "enable.idempotence": True,
            "isolation.level": "read_committed",
            "transactional": importer.saw_txn,
            "auto.commit": False,
            "subscribe": importer.saw_subscribe,
            **(client or {}),
        },
        "broker": {"min.insync.replicas": 2, "unclean.leader.election.enable": False, **(broker or {})},
        "drain": {"complete": bool(drain_complete)},
        "import": {
            "source": os.path.abspath(edn_path),
            "events": importer.index,
            "skipped": importer.skipped,
            "note": NOTE,
        },
    }
    with open(os.path.join(out_dir, "test.json"), "w", encoding="utf-8") as out:
        json.dump(test, out, indent=2)
    return test


def import_jepsen(edn: str, out_dir: str, **options) -> dict:
    """The entry point for the CLI: `gregor import-jepsen EDN OUT`."""
    return jepsen_to_history(edn, out_dir, **options)


def _parse_setting(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise GregorError(f"setting {text!r} must look like name=value, e.g. acks=1")
    name, raw = text.split("=", 1)
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return name, value


def register_import(subparsers) -> None:
    """Adds `import-jepsen EDN OUT`; checkers/cli.py calls this."""
    parser = subparsers.add_parser("import-jepsen", help="convert a Jepsen Kafka history.edn to a Gregor run directory")
    parser.add_argument("edn", help="path of Jepsen's history.edn")
    parser.add_argument("out", help="directory to write history.jsonl and test.json")
    parser.add_argument(
        "--client",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a client setting of the Jepsen run, e.g. enable.idempotence=false",
    )
    parser.add_argument(
        "--broker",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a broker setting, e.g. unclean.leader.election.enable=true",
    )
    parser.add_argument(
        "--drain-incomplete", action="store_true", help="the run did not end with final polls of every key"
    )
    parser.set_defaults(func=_run_import)


def _run_import(args) -> int:
    test = import_jepsen(
        args.edn,
        args.out,
        client=dict(_parse_setting(s) for s in args.client),
        broker=dict(_parse_setting(s) for s in args.broker),
        drain_complete=not args.drain_incomplete,
    )
    print(
        f"imported {test['import']['events']} events over {len(test['keys'])} "
        f"keys into {args.out}; check it with: gregor check {args.out}"
    )
    return 0
