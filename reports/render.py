"""The run's report.html: one self-contained page a person reads to judge a run.

Order on the page follows the reader's questions: did it pass (banner), what
was tested (setup), what went wrong and where (anomalies, partition logs,
timelines), and when faults hit (charts). Everything comes from test.json,
results.json and, for timelines, a streamed window of history.jsonl; an
anomaly is never recomputed here. Missing fields render as a note.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from pathlib import Path

from checkers.allowed import NOT_CHECKED, SKIPPED_PERMITTED
from ground.atomic import write_atomic
from ground.faults import CHART_COLOURS, chart_of
from reports import svg
from reports.evidence import client_log_note, instance_batches, known_finding, status_note
from reports.explain import explain
from reports.markup import esc, fmt_num
from reports.stored_run import EVIDENCE_ANOMALIES, Run, load_run
from reports.style import CSS
from reports.timeline import Windows, collect

TIMELINE_EXAMPLES = 2  # timelines per anomaly name (each is a few dozen ops)
TIMELINE_RADIUS = 30  # events either side of each involved op
TYPE_ORDER = ("ok", "fail", "info")


def write_report(run_dir, progress=None) -> Path:
    """Writes run_dir/report.html (atomically) and returns its path."""
    started = time.monotonic()
    run = load_run(run_dir)
    page = render(run)
    path = run.directory / "report.html"
    write_atomic(path, page)
    if progress:
        progress(f"report: wrote {path} ({len(page) / 1e6:.1f} MB, {time.monotonic() - started:.1f} s)")
    return path


# ---------------------------------------------------------------- helpers

# Checker rows that say what could not be checked (one vocabulary with the checker).
SKIPPED_CHECKS = NOT_CHECKED | {SKIPPED_PERMITTED}


def as_list(value) -> list:
    """A results.json array field, [] when missing or of the wrong type."""
    return value if isinstance(value, list) else []


def ordered_anomalies(run: Run) -> list[tuple[str, dict]]:
    """Bad anomalies first, then permitted; larger counts first within each."""

    def count(anomaly: dict) -> int:
        value = anomaly.get("count")
        return value if isinstance(value, int) else 0

    items = [item for item in run.anomalies.items() if item[0] not in SKIPPED_CHECKS]
    return sorted(items, key=lambda item: (bool(item[1].get("allowed")), -count(item[1]), item[0]))


def skipped_checks(run: Run) -> list[tuple[str, dict]]:
    """Rows the checker emits to say what it could not check: not anomalies,
    so they get a note of their own instead of a place among the anomalies."""
    return [(name, anomaly) for name, anomaly in sorted(run.anomalies.items()) if name in SKIPPED_CHECKS]


def skipped_section(run: Run) -> str:
    items = skipped_checks(run)
    if not items:
        return ""
    rows = []
    for name, anomaly in items:
        details = [
            str(example.get("cycle"))
            for example in as_list(anomaly.get("examples"))
            if isinstance(example, dict) and example.get("cycle")
        ]
        detail = f' <span class="note">({esc("; ".join(details))})</span>' if details else ""
        rows.append(f"<li>{esc(explain(name))}{detail}</li>")
    return '<div class="notes" id="not-checked"><b>Not checked:</b><ul>' + "".join(rows) + "</ul></div>"


def verdict_reason(run: Run) -> str:
    """The one line under the verdict: what made it invalid/unknown/valid."""
    bad = [(n, a) for n, a in ordered_anomalies(run) if not a.get("allowed")]
    allowed = [(n, a) for n, a in ordered_anomalies(run) if a.get("allowed")]

    def listing(items):
        return ", ".join(f"{n} ({a.get('count', '?')})" for n, a in items)

    if not run.results:
        return "Not checked yet: results.json is missing."
    permitted = f"; permitted by this configuration: {listing(allowed)}" if allowed else ""
    if run.verdict == "invalid":
        noun = "anomaly" if len(bad) == 1 else "anomalies"
        return f"{len(bad)} bad {noun}: {listing(bad)}{permitted}"
    given = run.results.get("verdict_reasons")
    if run.verdict == "unknown" and isinstance(given, list) and given:
        why = "; ".join(str(reason) for reason in given)
        return f"No bad anomaly found, but the result is not conclusive: {why}{permitted}"
    reasons = []
    if run.results.get("cut_short"):
        reasons.append("the history was cut short")
    drain = run.test.get("drain")
    if not isinstance(drain, dict) or not drain.get("complete"):
        reasons.append(
            "the final drain did not complete" if isinstance(drain, dict) else "no record of a complete drain"
        )
    stats = run.section("stats")
    if stats.get("ops") == 0:
        reasons.append("the history is empty")
    if run.verdict == "unknown":
        why = "; ".join(reasons) or "the checker could not decide"
        return f"No bad anomaly found, but the result is not conclusive: {why}{permitted}"
    ops = stats.get("ops")
    return (
        f"No bad anomalies in {fmt_num(ops)} operations{permitted}"
        if ops is not None
        else f"No bad anomalies{permitted}"
    )


def fault_windows(run: Run) -> list[svg.FaultWindow]:
    windows = []
    nemesis = run.results.get("nemesis")
    for window in nemesis if isinstance(nemesis, list) else []:
        if not isinstance(window, dict) or not isinstance(window.get("start_s"), (int, float)):
            continue
        stop = window.get("stop_s")
        label = window.get("label") or window.get("f") or "fault"
        windows.append(
            svg.FaultWindow(
                float(window["start_s"]),
                float(stop) if isinstance(stop, (int, float)) else None,
                str(label),
                chart_of(str(window.get("f") or label)),
            )
        )
    return windows


def duration_s(run: Run) -> float | None:
    stats = run.section("stats")
    value = stats.get("duration_s") or run.test.get("duration_s") or run.test.get("time_limit_s")
    return float(value) if isinstance(value, (int, float)) else None


def _setting(run: Run, name: str, *places: str):
    config = run.section("config")
    if name in config:
        return config[name]
    for place in places:
        section = run.test.get(place) or {}
        if isinstance(section, dict) and name in section:
            return section[name]
    return None


def faults_text(run: Run) -> str:
    spec = run.test.get("nemesis")
    if isinstance(spec, dict):
        faults = spec.get("faults") or spec.get("nemesis")
        if isinstance(faults, list):
            return ", ".join(map(str, faults)) or "none"
    if isinstance(spec, list):
        return ", ".join(map(str, spec)) or "none"
    if isinstance(spec, str):
        return spec
    kinds = sorted({w.kind for w in fault_windows(run)})
    return ", ".join(kinds) if kinds else "none recorded"


# ---------------------------------------------------------------- sections


def first_instance(run: Run) -> str:
    """The worst anomaly's first instance in words, so the banner says what went wrong where."""
    for name, anomaly in ordered_anomalies(run):
        if anomaly.get("allowed"):
            return ""
        for example in anomaly.get("examples") or []:
            if not isinstance(example, dict):
                continue
            what = [f"e.g. {name}:"]
            values = example.get("values", example.get("value"))
            if values is not None:
                what.append(f"value {', '.join(map(str, values)) if isinstance(values, list) else values}")
            if example.get("key") is not None:
                where = run.key_location(example.get("key"))
                what.append(f"of key {example.get('key')}" + (f" ({where})" if where else ""))
            offsets = example.get("offsets", example.get("offset"))
            if offsets is not None:
                what.append(f"at offset {', '.join(map(str, offsets)) if isinstance(offsets, list) else offsets}")
            faults = example.get("nemesis")
            what.append(f"while {', '.join(map(str, faults))} was active" if faults else "with no fault active")
            return f'<div class="first"><a href="#anomaly-{esc(name)}">{esc(" ".join(what))}</a></div>'
    return ""


def anomaly_marks(run: Run, windows: Windows) -> list[svg.Mark]:
    """When each bad example happened (its `time_s`, else its first named op's completion), for the time charts."""
    marks = []
    for name, anomaly in ordered_anomalies(run):
        if anomaly.get("allowed"):
            continue
        for example in (anomaly.get("examples") or [])[:10]:
            if not isinstance(example, dict):
                continue
            times = [
                windows.ops[o].complete_time
                for o in as_list(example.get("ops"))
                if o in windows.ops and windows.ops[o].complete_time is not None
            ]
            if isinstance(example.get("time_s"), (int, float)):
                at = example["time_s"]
            elif isinstance(example.get("time"), (int, float)):
                at = example["time"] / 1e9
            else:
                at = min(times, default=None)
                at = at / 1e9 if at is not None else None
            if at is not None:
                marks.append(
                    svg.Mark(
                        at, f"{name} (key {example.get('key')}, value {example.get('value', example.get('values'))})"
                    )
                )
    return marks[:60]


def banner(run: Run) -> str:
    verdict = run.verdict if run.results else "unknown"
    headline = {
        "valid": "VALID: no broken guarantee found",
        "invalid": "INVALID: the system broke its guarantees",
        "unknown": "UNKNOWN: the run was not conclusive",
    }[verdict]
    icon = {"valid": "&#10004;", "invalid": "&#10008;", "unknown": "?"}[verdict]
    name = run.test.get("name") or run.directory.name
    system = " ".join(str(x) for x in (run.test.get("system"), run.test.get("version")) if x)
    return (
        f'<header id="verdict" class="banner {verdict}" data-verdict="{verdict}">'
        f'<div class="icon">{icon}</div><div><div class="headline">{headline}</div>'
        f'<div class="reason">{esc(verdict_reason(run))}</div>{first_instance(run)}'
        f'<div class="which">{esc(name)} &middot; {esc(system)} &middot; {esc(run.directory)}</div></div></header>'
    )


def _node_label(node) -> str:
    """A node of test.json: a name, or {"name", "address"} as `gregor run` writes it
    ({"name", "ip"} in runs before the backends)."""
    if isinstance(node, dict):
        return " ".join(str(node[k]) for k in ("name", "address", "ip") if node.get(k) is not None) or str(node)
    return str(node)


def _setup_extra(run: Run) -> list[tuple[str, object]]:
    """What test.json's "setup" (the lab's own description) adds: the backend
    (with an SSH lab's hosts and how their keys were checked),
    and the system's storage, topology and transaction protocol where it says them."""
    setup = run.test.get("setup") if isinstance(run.test.get("setup"), dict) else {}
    rows = [("backend", setup.get("backend") or run.test.get("backend"))]
    for key, label in (
        ("hosts", "hosts"),
        ("host_keys", "SSH host keys"),
        ("storage", "storage"),
        ("brokers", "brokers"),
        ("controllers", "controllers"),
        ("transaction.version", "transaction protocol"),
    ):
        if setup.get(key) is not None:
            value = setup[key]
            if key == "transaction.version":
                value = _transaction_protocol(run, value)
            rows.append((label, value))
    return rows


def _client(run: Run) -> tuple[str, str | None]:
    """(library, version) of the run's clients: test.json's client "library" (runs before
    the Java client were all librdkafka's, its version in "versions")."""
    client = run.test.get("client") if isinstance(run.test.get("client"), dict) else {}
    versions = run.test.get("versions") if isinstance(run.test.get("versions"), dict) else {}
    library = client.get("library") or "librdkafka"
    return library, client.get("library.version") or (versions.get("librdkafka") if library == "librdkafka" else None)


def client_text(run: Run) -> str:
    library, version = _client(run)
    if library == "java":
        return f"Kafka's Java client (kafka-clients {version or '?'})"
    return f"librdkafka {version} (under confluent-kafka)" if version else "librdkafka (under confluent-kafka)"


def protocol_counts_text(counts: dict) -> str:
    """test.json's transaction_protocol counts in words: "3 v2, 1 classic", and the ids
    the log could not place, if any (the report's setup and the run's progress line)."""
    text = f"{counts.get('v2', 0)} v2, {counts.get('classic', 0)} classic"
    return text + (f", {counts['unknown']} unknown" if counts.get("unknown") else "")


def _transaction_protocol(run: Run, level) -> str:
    """The brokers' level, and what the clients spoke: what the brokers' transaction log
    recorded (test.json "transaction_protocol"), else what the client implements:
    librdkafka only the first protocol (no KIP-890 v2), whatever the brokers offer."""
    said = f"{level} (the brokers' transaction.version)"
    seen = run.test.get("transaction_protocol") if isinstance(run.test.get("transaction_protocol"), dict) else {}
    library, version = _client(run)
    if seen.get("protocol") in ("v2", "classic", "mixed", "unknown"):
        counts = seen.get("transactional_ids") or {}
        said += (
            f"; the brokers' transaction log shows the run's transactional ids used {seen['protocol']} "
            f"({protocol_counts_text(counts)})"
        )
    elif seen.get("error"):
        said += f"; the brokers' transaction log could not be read ({seen['error']})"
    if library == "librdkafka":
        said += (
            f"; the clients ({client_text(run).replace(' (under confluent-kafka)', '')}, under confluent-kafka) "
            "do not implement transaction protocol v2 (KIP-890) and use the classic protocol"
        )
    return said


def setup_section(run: Run) -> str:
    def show(value):
        if value is None:
            return '<span class="missing">not recorded</span>'
        if isinstance(value, bool):
            return "true" if value else "false"
        return esc(value)

    nodes = run.test.get("nodes")
    if isinstance(nodes, list):
        nodes = f"{len(nodes)} ({', '.join(map(_node_label, nodes))})"
    duration = duration_s(run)
    rows = [
        ("system", " ".join(str(x) for x in (run.test.get("system"), run.test.get("version")) if x) or None),
        *_setup_extra(run),
        ("nodes", nodes),
        ("workload", run.test.get("workload")),
        ("client", client_text(run)),
        ("acks", _setting(run, "acks", "client")),
        ("enable.idempotence", _setting(run, "enable.idempotence", "client")),
        ("isolation.level", _setting(run, "isolation.level", "client")),
        ("min.insync.replicas", _setting(run, "min.insync.replicas", "broker")),
        ("unclean leader election", _setting(run, "unclean.leader.election.enable", "broker")),
        ("auto commit", _setting(run, "auto.commit", "client")),
        ("transactional", _setting(run, "transactional", "client")),
        ("subscribe (groups)", _setting(run, "subscribe", "client")),
        ("replication.factor", _setting(run, "replication.factor", "broker")),
        ("faults", faults_text(run)),
        ("duration", f"{duration:.1f} s" if duration is not None else None),
        ("concurrency", run.test.get("concurrency")),
        ("seed", run.test.get("seed")),
    ]
    cells = "".join(
        f'<div class="kv"><div class="k">{esc(k)}</div><div class="v">{show(v)}</div></div>' for k, v in rows
    )
    return f'<section id="setup"><h2>Setup</h2><div class="grid">{cells}</div></section>'


def truncation_section(run: Run) -> str:
    """Keys whose log the final drain found ending below an offset a client had
    seen (test.json drain.truncated, docs/SCENARIOS.md): acknowledged records
    that no longer exist, shown as evidence rather than as a drain that waited."""
    drain = run.test.get("drain") if isinstance(run.test.get("drain"), dict) else {}
    truncated = drain.get("truncated")
    if not isinstance(truncated, dict) or not truncated:
        return ""
    items = []
    for key, seen in sorted(truncated.items(), key=lambda kv: str(kv[0])):
        seen = seen if isinstance(seen, dict) else {}
        end, acked = seen.get("end_offset"), seen.get("acked_offset")
        gone = f" ({acked - end + 1} offset(s) gone)" if isinstance(end, int) and isinstance(acked, int) else ""
        where = run.key_location(key)
        items.append(
            f"<li>key {esc(key)}{f' ({esc(where)})' if where else ''}: the log ends at offset "
            f"{esc(end)}, but a client had seen offset {esc(acked)}{esc(gone)}</li>"
        )
    return (
        '<section id="truncation"><h2>Truncated logs</h2><div class="notes">The final drain read these keys to '
        "their end; each ended below an offset some client had learned of, so records that were "
        "acknowledged or read are gone from the log (the drain stopped waiting for them):<ul>"
        + "".join(items)
        + "</ul></div></section>"
    )


def summary_table(run: Run) -> str:
    items = ordered_anomalies(run)
    if not run.results:
        return ""
    if not items:
        return (
            '<section id="summary"><h2>Anomalies</h2>'
            '<p class="good">The checker found no anomaly of any kind.</p></section>'
        )
    rows = []
    for name, anomaly in items:
        kind = "permitted" if anomaly.get("allowed") else "bad"
        why = anomaly.get("why_allowed") if anomaly.get("allowed") else "not permitted by this configuration"
        rows.append(
            f'<tr class="{kind}"><td><span class="badge {kind}">{kind.upper()}</span></td>'
            f'<td><a href="#anomaly-{esc(name)}">{esc(name)}</a></td>'
            f'<td class="num">{fmt_num(anomaly.get("count"))}</td>'
            f"<td>{esc(explain(name))}</td><td>{esc(why)}</td></tr>"
        )
    return (
        '<section id="summary"><h2>Anomalies</h2><table class="summary"><thead><tr><th></th><th>anomaly</th>'
        "<th>count</th><th>what it means</th><th>permitted?</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></section>"
    )


def _op_text(op_id, windows: Windows) -> str:
    op = windows.ops.get(op_id)
    if op is None:
        return f"<li>op {esc(op_id)}</li>"
    start = f"{op.invoke_time / 1e9:.3f}s" if op.invoke_time is not None else "?"
    stop = f"{op.complete_time / 1e9:.3f}s" if op.complete_time is not None else "?"
    error = f' <span class="err">{esc(op.error)}</span>' if op.error else ""
    summary = f' <span class="mops">{esc(op.summary())}</span>' if op.summary() else ""
    return (
        f"<li>op {esc(op_id)}: process {esc(op.process)} <b>{esc(op.f)}</b> "
        f'<span class="outcome {esc(op.type)}">{esc(op.type)}</span> {start} &rarr; {stop}{error}{summary}</li>'
    )


def _list(value) -> str:
    if isinstance(value, list):
        return ", ".join(esc(v) for v in value)
    return esc(value)


def anomaly_section(run: Run, name: str, anomaly: dict, windows: Windows, faults) -> str:
    allowed = bool(anomaly.get("allowed"))
    kind = "permitted" if allowed else "bad"
    examples = [e for e in anomaly.get("examples") or [] if isinstance(e, dict)]
    why = (
        f"Permitted here because <b>{esc(anomaly.get('why_allowed') or 'the configuration allows it')}</b>."
        if allowed
        else "Bad: no setting of this run permits it, so the system broke a promise it made."
    )
    parts = [
        f'<section class="anomaly {kind}" id="anomaly-{esc(name)}">',
        f'<h3><span class="badge {kind}">{kind.upper()}</span> {esc(name)} '
        f'<span class="count">&times; {fmt_num(anomaly.get("count"))}</span></h3>',
        f'<p class="explain">{esc(explain(name))}</p><p class="why">{why}</p>',
    ]
    if anomaly.get("description"):
        parts.append(f'<p class="desc">Checker definition: {esc(anomaly["description"])}</p>')
    if not examples:
        parts.append('<p class="note">The checker recorded no examples of this anomaly.</p>')
    else:
        partitions = run.section("partitions")
        rows = []
        shown_batches: dict[str, int] = {}
        for number, example in enumerate(examples, 1):
            key = example.get("key")
            where = run.key_location(key)
            link = f' <a href="#partition-{esc(key)}">log</a>' if str(key) in partitions else ""
            values = example.get("values", example.get("value"))
            offsets = example.get("offsets", example.get("offset"))
            ops = as_list(example.get("ops"))
            ops_html = '<ul class="ops">' + "".join(_op_text(o, windows) for o in ops) + "</ul>" if ops else ""
            cycle = f'<div class="cycle">cycle: {esc(example.get("cycle"))}</div>' if example.get("cycle") else ""
            nemesis = _list(example.get("nemesis")) if example.get("nemesis") else '<span class="missing">none</span>'
            rows.append(
                f"<tr><td>{number}</td><td>{esc(key)}</td><td>{esc(where) or '?'}{link}</td>"
                f'<td>{_list(offsets)}</td><td class="value">{_list(values)}</td>'
                f"<td>{ops_html}{cycle}</td><td>{nemesis}</td></tr>"
            )
            batches = (
                instance_batches(run, example) if name in EVIDENCE_ANOMALIES else known_finding(run.evidence, example)
            )
            if batches in shown_batches:  # several readers of one offset: one table
                batches = f'<p class="note">The brokers\' batches: as for instance {shown_batches[batches]}.</p>'
            elif batches:
                shown_batches[batches] = number
            if batches:
                rows.append(f'<tr class="evidence-row"><td></td><td colspan="6">{batches}</td></tr>')
        shown = f"{len(examples)} of {fmt_num(anomaly.get('count'))}"
        parts.append(
            f'<p>Instances (showing {shown}):</p><table class="instances"><thead><tr><th>#</th><th>key</th>'
            "<th>topic-partition</th><th>offset(s)</th><th>value(s)</th><th>ops involved</th>"
            "<th>faults active</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        )
        parts.append(status_note(run, name) + client_log_note(run, name))
        for number, example in enumerate(examples[:TIMELINE_EXAMPLES], 1):
            ids = [o for o in as_list(example.get("ops")) if isinstance(o, int)]
            if not ids:
                continue
            clusters = windows.clusters(ids, TIMELINE_RADIUS)
            for group in clusters:
                named = ", ".join(str(o.op) for o in group if o.op in ids)
                picture = svg.process_timeline(group, faults, set(ids))
                if picture:
                    parts.append(
                        f'<div class="tl"><p class="caption">Instance {number}: operations per process around '
                        f"op {esc(named)} (outlined: the ops involved; green ok, red fail, amber info; "
                        f"shaded: faults)</p>{picture}</div>"
                    )
            if not clusters and windows.note:
                parts.append(f'<p class="note">{esc(windows.note)}</p>')
    parts.append("</section>")
    return "".join(parts)


def anomalies_sections(run: Run, windows: Windows, faults) -> str:
    items = ordered_anomalies(run)
    if not items:
        return ""
    bad = [anomaly_section(run, n, a, windows, faults) for n, a in items if not a.get("allowed")]
    allowed = [anomaly_section(run, n, a, windows, faults) for n, a in items if a.get("allowed")]
    out = ""
    if bad:
        out += '<section id="bad"><h2>Bad anomalies</h2>' + "".join(bad) + "</section>"
    if allowed:
        out += (
            '<section id="permitted"><h2>Permitted anomalies</h2><p class="note">This configuration does not '
            "promise to prevent these; they do not make the run invalid.</p>" + "".join(allowed) + "</section>"
        )
    return out


def partitions_section(run: Run) -> str:
    partitions = run.results.get("partitions")
    if not isinstance(partitions, dict) or not partitions:
        note = (
            "" if not run.anomalies else '<p class="note">results.json has no partition pictures (older checker?).</p>'
        )
        return f'<section id="partitions"><h2>Partition logs</h2>{note}</section>' if note else ""
    highlight: dict[str, set] = defaultdict(set)
    named_by: dict[str, set] = defaultdict(set)
    for name, anomaly in run.anomalies.items():
        for example in (anomaly or {}).get("examples") or []:
            if not isinstance(example, dict):
                continue
            named_by[str(example.get("key"))].add(name)
            offsets = example.get("offsets") if isinstance(example.get("offsets"), list) else [example.get("offset")]
            highlight[str(example.get("key"))].update(o for o in offsets if o is not None)
    parts = [
        '<section id="partitions"><h2>Partition logs</h2><p class="note">One cell per offset, left to right, '
        "in rows of 50; outlined (cyan) cells are the offsets named by an anomaly. Hover a cell for its value.</p>"
    ]
    statuses = set()
    for key, picture in sorted(partitions.items(), key=lambda kv: str(kv[0])):
        if not isinstance(picture, dict):
            continue
        offsets = [o for o in as_list(picture.get("offsets")) if isinstance(o, dict)]
        counts: dict[str, int] = defaultdict(int)
        for entry in offsets:
            counts[str(entry.get("status"))] += 1
        statuses.update(counts)
        where = f"{picture.get('topic', '?')}-{picture.get('partition', '?')}"
        cut = (
            ' <span class="note">(truncated to the offsets around the anomalies)</span>'
            if picture.get("truncated")
            else ""
        )
        tally = ", ".join(f"{esc(s)}: {n}" for s, n in sorted(counts.items()))
        names = ", ".join(f'<a href="#anomaly-{esc(n)}">{esc(n)}</a>' for n in sorted(named_by.get(str(key), ())))
        parts.append(
            f'<div class="partition" id="partition-{esc(key)}"><h3>key {esc(key)} &rarr; {esc(where)}{cut}</h3>'
            f"<p>{f'anomalies here: {names}. ' if names else ''}offsets by status: {tally}</p>"
            f"{svg.partition_log(offsets, highlight=highlight.get(str(key)))}</div>"
        )
    parts.append(svg.status_legend(statuses))
    parts.append("</section>")
    return "".join(parts)


def charts_section(run: Run, faults, marks=()) -> str:
    stats = run.section("stats")
    series = stats.get("timeseries") if isinstance(stats.get("timeseries"), dict) else {}
    rows = [r for r in as_list(series.get("rows")) if isinstance(r, dict) and isinstance(r.get("t"), (int, float))]
    parts = ['<section id="charts"><h2>Throughput and latency over time</h2>']
    parts.append(fault_legend(faults))
    if marks:
        parts.append(
            '<p class="note">Red triangles above the charts mark when a bad anomaly happened (hover for which).</p>'
        )
    if not rows:
        parts.append(
            '<p class="note">results.json has no stats.timeseries, so no throughput or latency charts.</p></section>'
        )
        return "".join(parts)
    bucket = float(series.get("bucket_s") or 1.0)
    x_max = duration_s(run) or max(r["t"] for r in rows) + bucket
    by_f: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        by_f[str(row.get("f"))][str(row.get("type"))].append(row)
    buckets = max(1, math.ceil(x_max / bucket - 1e-9))
    for f in sorted(by_f):
        throughput, errors, latency = [], [], []
        for kind in sorted(by_f[f], key=lambda k: (TYPE_ORDER.index(k) if k in TYPE_ORDER else 9, k)):
            colour = svg.OUTCOME_COLOURS.get(kind, "#555")
            counts = [0.0] * buckets
            for row in by_f[f][kind]:
                slot = int(row["t"] / bucket)
                if 0 <= slot < buckets:
                    counts[slot] += float(row.get("count") or 0)
            # the last bucket may be partial: divide by the time it covers, not by bucket_s
            line = svg.Series(
                f"{f} {kind}",
                colour,
                [(i * bucket, c / max(min(bucket, x_max - i * bucket), bucket / 10)) for i, c in enumerate(counts)],
            )
            # failures are few next to successes: their own chart keeps an error burst visible
            if kind == "ok":
                throughput.append(line)
            elif any(counts):
                errors.append(line)
            ordered = sorted(by_f[f][kind], key=lambda r: r["t"])
            for field, dash in (("p50_ms", ""), ("p99_ms", "4 3")):
                if field == "p50_ms" and kind != "ok":
                    continue
                points = [(r["t"], float(r[field])) for r in ordered if isinstance(r.get(field), (int, float))]
                if points:
                    latency.append(svg.Series(f"{f} {kind} {field[:3]}", colour, points, dash))
        parts.append(f'<div class="chartrow" id="chart-{esc(f)}">')
        if throughput:
            parts.append(
                svg.line_chart(
                    throughput,
                    x_max,
                    faults,
                    title=f"{f}: successful (ok) operations per second",
                    y_label="ops/s",
                    marks=marks,
                )
            )
        if errors:
            parts.append(
                svg.line_chart(
                    errors,
                    x_max,
                    faults,
                    title=f"{f}: failed (fail) and unknown-outcome (info) operations per second",
                    y_label="ops/s",
                    marks=marks,
                )
            )
        else:
            parts.append(f'<p class="note">{esc(f)}: no failed or unknown-outcome operations.</p>')
        if latency:
            parts.append(
                svg.line_chart(
                    latency,
                    x_max,
                    faults,
                    title=f"{f}: latency (solid: ok p50; dashed: p99 of each outcome)",
                    y_label="ms",
                    marks=marks,
                )
            )
        parts.append("</div>")
    parts.append(latency_table(stats))
    parts.append("</section>")
    return "".join(parts)


def fault_legend(faults) -> str:
    if not faults:
        return '<p class="note">No fault windows recorded (no nemesis in results.json).</p>'
    rows = "".join(
        f'<tr><td><span class="swatch" style="background:{CHART_COLOURS.get(w.kind)}"></span>{esc(w.kind)}</td>'
        f'<td>{esc(w.label)}</td><td class="num">{w.start:.1f}s</td>'
        f'<td class="num">{"never healed" if w.stop is None else f"{w.stop:.1f}s"}</td></tr>'
        for w in faults
    )
    kinds = sorted({w.kind for w in faults})
    key = " &nbsp; ".join(
        f'<span class="swatch" style="background:{CHART_COLOURS.get(k)}"></span>{esc(k)}' for k in kinds
    )
    state = " open" if len(faults) <= 8 else ""
    return (
        f'<div class="legend">Shaded in every chart: {key}. Hover a shaded band for the fault and its times.</div>'
        f"<details{state}><summary>All {len(faults)} fault windows</summary>"
        '<table class="faults"><thead><tr><th>kind</th>'
        "<th>fault</th><th>start</th><th>healed</th></tr></thead><tbody>" + rows + "</tbody></table></details>"
    )


def latency_table(stats: dict) -> str:
    rows = [r for r in as_list(stats.get("latency")) if isinstance(r, dict)]
    if not rows:
        return ""
    body = "".join(
        f'<tr><td>{esc(r.get("f"))}</td><td><span class="outcome {esc(r.get("type"))}">{esc(r.get("type"))}</span></td>'
        f'<td class="num">{fmt_num(r.get("count"))}</td><td class="num">{fmt_num(r.get("p50_ms"))}</td>'
        f'<td class="num">{fmt_num(r.get("p90_ms"))}</td><td class="num">{fmt_num(r.get("p99_ms"))}</td>'
        f'<td class="num">{fmt_num(r.get("max_ms"))}</td></tr>'
        for r in rows
    )
    return (
        '<table class="latency"><thead><tr><th>op</th><th>outcome</th><th>count</th><th>p50 ms</th><th>p90 ms</th>'
        "<th>p99 ms</th><th>max ms</th></tr></thead><tbody>" + body + "</tbody></table>"
    )


def lag_section(run: Run, faults, marks=()) -> str:
    lag = run.section("stats").get("lag")
    lag = lag if isinstance(lag, dict) else {}
    rows = [
        r
        for r in as_list(lag.get("rows"))
        if isinstance(r, dict) and isinstance(r.get("t"), (int, float)) and isinstance(r.get("lag_ms"), (int, float))
    ]
    if not rows:
        return '<section id="lag"><h2>Consumer lag</h2><p class="note">results.json has no stats.lag.</p></section>'
    bucket = float(lag.get("bucket_s") or 1.0)
    x_max = duration_s(run) or max(r["t"] for r in rows) + bucket
    by_key: dict[str, dict[float, float]] = defaultdict(dict)
    for row in rows:
        points = by_key[str(row.get("key"))]
        points[row["t"]] = max(points.get(row["t"], 0.0), float(row["lag_ms"]))
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    if len(by_key) <= len(palette):
        series = [
            svg.Series(f"key {k}", palette[i], sorted(v.items())) for i, (k, v) in enumerate(sorted(by_key.items()))
        ]
    else:
        worst: dict[float, float] = defaultdict(float)
        for points in by_key.values():
            for t, value in points.items():
                worst[t] = max(worst[t], value)
        series = [svg.Series(f"max of {len(by_key)} keys", palette[0], sorted(worst.items()))]
    chart = svg.line_chart(
        series,
        x_max,
        faults,
        title="consumer real-time lag: acknowledged send to read (max per bucket)",
        y_label="lag ms",
        marks=marks,
    )
    return f'<section id="lag"><h2>Consumer lag</h2>{chart}</section>'


def elle_section(run: Run) -> str:
    elle = run.results.get("elle")
    if not isinstance(elle, dict):
        return '<section id="elle"><h2>Elle</h2><p class="note">results.json has no Elle section.</p></section>'
    if not elle.get("available"):
        return (
            f'<section id="elle"><h2>Elle</h2><p>Elle was not run: {esc(elle.get("reason") or "no reason given")}.'
            "</p></section>"
        )
    items = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in sorted(elle.items()) if k != "available")
    return f'<section id="elle"><h2>Elle</h2><p>Elle ran on this history.</p><table>{items}</table></section>'


def stats_section(run: Run) -> str:
    stats = run.section("stats")
    checker = run.section("checker")
    if not stats and not checker:
        return ""
    cells = [(k, stats.get(k)) for k in ("ops", "ok", "fail", "info", "events") if k in stats]
    by_f = stats.get("by_f") if isinstance(stats.get("by_f"), dict) else {}
    cells += [
        (f"{f}", ", ".join(f"{t} {fmt_num(n)}" for t, n in counts.items()))
        for f, counts in sorted(by_f.items())
        if isinstance(counts, dict)
    ]
    if checker:
        cells.append(("checker", ", ".join(f"{k} {fmt_num(v)}" for k, v in sorted(checker.items()))))
    body = "".join(
        f'<div class="kv"><div class="k">{esc(k)}</div><div class="v">'
        f"{fmt_num(v) if isinstance(v, (int, float)) else esc(v)}</div></div>"
        for k, v in cells
    )
    return f'<section id="stats"><h2>Operations</h2><div class="grid">{body}</div></section>'


def notes_section(run: Run, windows: Windows) -> str:
    notes = list(run.notes)
    if windows.note and run.anomalies:
        notes.append(windows.note)
    if not notes:
        return ""
    return '<div class="notes"><b>Partial data:</b><ul>' + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul></div>"


def example_op_ids(run: Run) -> list[int]:
    ids = []
    for anomaly in run.anomalies.values():
        for example in (anomaly or {}).get("examples") or []:
            if isinstance(example, dict):
                ids.extend(o for o in as_list(example.get("ops")) if isinstance(o, int))
    return ids


def render(run: Run) -> str:
    """The whole page as one string."""
    windows = collect(run.history_path, example_op_ids(run), radius=TIMELINE_RADIUS)
    faults = fault_windows(run)
    marks = anomaly_marks(run, windows)
    verdict = run.verdict if run.results else "unknown"
    title = f"{verdict.upper()}: {run.test.get('name') or run.directory.name} - Gregor"
    nav = (
        '<nav><a href="#verdict">verdict</a><a href="#setup">setup</a><a href="#summary">anomalies</a>'
        '<a href="#partitions">partition logs</a><a href="#charts">throughput &amp; latency</a>'
        '<a href="#lag">lag</a><a href="#elle">elle</a><a href="#stats">operations</a></nav>'
    )
    body = [
        banner(run),
        nav,
        notes_section(run, windows),
        skipped_section(run),
        setup_section(run),
        truncation_section(run),
        summary_table(run),
        anomalies_sections(run, windows, faults),
        partitions_section(run),
        charts_section(run, faults, marks),
        lag_section(run, faults, marks),
        elle_section(run),
        stats_section(run),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        + "".join(body)
        + "<footer>Written by Gregor from test.json, results.json and history.jsonl.</footer></body></html>\n"
    )
