"""Beside each lost-write, aborted-read or duplicate instance: the brokers' own batches at its offset.

Beside an eos-duplicate: the copier's own log, where it shows the reproduced
stale fetch (harness/controller/stale_fetch.py).

From evidence/segments.json (harness/controller/evidence.py, docs/RESULTS.md):
per node, the batches of the instance's partition around its offset(s) (one
row for a batch the replicas agree on, naming its nodes), the
batch holding the offset highlighted, and the control batch (COMMIT/ABORT)
that ended that batch's transaction. Every value printed comes from the
brokers' logs or the clients' records: all of it goes through esc.
"""

from __future__ import annotations

import json

from reports.markup import esc
from reports.stored_run import EVIDENCE_ANOMALIES, Run
from workloads.librdkafka_log import DEBUG, STALE_FETCH, debug_on

SHOWN_RADIUS = 5  # offsets either side of the instance's shown in its table
SHOWN_VALUES = 5  # record values shown per batch


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _batches(replica: dict) -> list[dict]:
    found = replica.get("batches") if isinstance(replica.get("batches"), list) else []
    return [b for b in found if isinstance(b, dict) and _int(b.get("base_offset")) is not None]


def _last(batch: dict) -> int:
    last = _int(batch.get("last_offset"))
    return last if last is not None else batch["base_offset"]


def _holds(batch: dict, offset: int) -> bool:
    return batch["base_offset"] <= offset <= _last(batch)


def _ending(batches: list[dict], batch: dict) -> dict | None:
    """The producer's first control batch after a transactional batch: the marker that ended it."""
    if not batch.get("transactional") or batch.get("control"):
        return None
    last = _last(batch)
    for later in batches:
        if later.get("control") and later.get("producer_id") == batch.get("producer_id"):
            if later["base_offset"] > last:
                return later
    return None


def known_finding(evidence: dict, example: dict) -> str:
    """One line when the brokers' batches, or the copier's own log, show this instance to be
    a finding Gregor has reproduced (evidence/segments.json "known_findings",
    harness/controller/known_findings.py)."""
    found = evidence.get("known_findings") if isinstance(evidence.get("known_findings"), list) else []
    for shown in found:
        if not isinstance(shown, dict):
            continue
        if (shown.get("key"), shown.get("value")) != (example.get("key"), example.get("value")):
            continue
        named = f"the reproduced finding <code>{esc(shown.get('finding'))}</code> ({esc(shown.get('report'))})"
        if shown.get("finding") == STALE_FETCH:
            return (
                f'<p class="known-finding">The copier\'s own librdkafka log shows this to be {named}: process '
                f"{esc(shown.get('process'))}, which copied this input again, fetched its partition from offset "
                f"{esc(shown.get('fetched_from'))} while the partition was not assigned to it "
                f"({esc(shown.get('log'))}: <code>{esc(shown.get('line'))}</code>).</p>"
            )
        return (
            f'<p class="known-finding">The brokers\' log shows this to be {named}: offset '
            f"{esc(shown.get('offset'))} holds an aborted record of the same producer "
            f"(id {esc(shown.get('producer_id'))}, epoch {esc(shown.get('producer_epoch'))}, sequence "
            f"{esc(shown.get('base_sequence'))}; ABORT at {esc(shown.get('aborted_at'))} on "
            f"{esc(shown.get('node'))}), which the broker took this write for.</p>"
        )
    return ""


def client_log_note(run: Run, name: str) -> str:
    """For eos-duplicate on librdkafka copiers that did not log their fetches: how to
    see whether the reproduced stale fetch is behind it (else ""). Not for copiers
    that commit outside their transactions (`copier.offsets`), whose own design
    copies an input again after a crash."""
    client = run.test.get("client") if isinstance(run.test.get("client"), dict) else {}
    if name != "eos-duplicate" or client.get("library", "librdkafka") != "librdkafka" or debug_on(run.test):
        return ""
    if client.get("copier.offsets", "txn") != "txn":
        return ""
    return (
        '<p class="note">librdkafka can hand a copier records it fetched while the partition was another '
        f"member's (the reproduced finding <code>{STALE_FETCH}</code>, docs/findings/). This run's consumers did "
        "not log their fetches, so whether that is behind these copies cannot be shown. To see it, run again with "
        f"<code>--consumer-config {DEBUG}</code>: an instance it explains is then named here.</p>"
    )


def status_note(run: Run, name: str) -> str:
    """One line for an anomaly section whose batches the run cannot show (else "")."""
    if name not in EVIDENCE_ANOMALIES:
        return ""
    evidence = run.evidence
    if not evidence:
        return (
            '<p class="note">No broker evidence: this run has no evidence/segments.json (a run made before '
            "Gregor collected it, or one checked apart from <code>gregor run</code>).</p>"
        )
    said = evidence.get("error") or evidence.get("note")
    if evidence.get("error"):
        return f'<p class="note">The brokers\' segments could not be read: {esc(said)}</p>'
    if said:
        return f'<p class="note">No broker evidence: {esc(said)}</p>'
    return ""


def _cell_values(batch: dict) -> str:
    records = [r for r in batch.get("records") or [] if isinstance(r, dict)]
    values = [r.get("value") for r in records if r.get("value") is not None][:SHOWN_VALUES]
    more = len([r for r in records if r.get("value") is not None]) - len(values) + (batch.get("records_left_out") or 0)
    text = ", ".join(esc(v) for v in values)
    return text + (f" &hellip; (+{more})" if more > 0 else "")


def _merged(shown: list[tuple[str, dict, str]]) -> list[tuple[str, dict, str]]:
    """One row per batch the replicas agree on, naming every node that holds it, in offset
    order; a replica that differs keeps a row of its own, so a divergence stands out."""
    nodes_of: dict[str, list[str]] = {}
    first: dict[str, tuple[dict, str]] = {}
    for node, batch, kind in shown:
        same = json.dumps([batch, kind], sort_keys=True, default=str)
        nodes_of.setdefault(same, []).append(node)
        first.setdefault(same, (batch, kind))
    rows = [(", ".join(nodes_of[same]), batch, kind) for same, (batch, kind) in first.items()]
    return sorted(rows, key=lambda row: row[1]["base_offset"])


def _row(node: str, batch: dict, kind: str) -> str:
    last = batch.get("last_offset")
    span = esc(batch["base_offset"]) + (f"&ndash;{esc(last)}" if last != batch["base_offset"] else "")
    sequence = esc(batch.get("base_sequence"))
    if batch.get("last_sequence") not in (None, batch.get("base_sequence")):
        sequence += f"&ndash;{esc(batch.get('last_sequence'))}"
    marker = esc(batch.get("marker") or "control") if batch.get("control") else ""
    label = {"holds": " (holds the offset)", "ends": " (ended its transaction)"}.get(kind, "")
    return (
        f'<tr class="{kind}"><td>{esc(node)}</td><td class="num">{span}{label}</td>'
        f'<td class="num">{esc(batch.get("producer_id"))}</td><td class="num">{esc(batch.get("producer_epoch"))}</td>'
        f'<td class="num">{sequence}</td><td>{"yes" if batch.get("transactional") else "no"}</td>'
        f'<td class="marker">{marker}</td><td class="value">{_cell_values(batch)}</td></tr>'
    )


def instance_batches(run: Run, example: dict) -> str:
    """The table of the brokers' batches for one instance ("" when there are none to show)."""
    evidence = run.evidence
    nodes = evidence.get("nodes") if isinstance(evidence.get("nodes"), dict) else {}
    where = run.key_location(example.get("key"))
    named = example.get("offsets") if isinstance(example.get("offsets"), list) else [example.get("offset")]
    offsets = [o for o in map(_int, named) if o is not None]
    if not nodes or where is None or not offsets:
        return ""
    ranges = [(o - SHOWN_RADIUS, o + SHOWN_RADIUS) for o in offsets]
    shown, lines = [], []
    for node in sorted(nodes, key=str):
        found = nodes[node] if isinstance(nodes[node], dict) else {}
        if found.get("error"):
            lines.append(f"{esc(node)}: the dump failed ({esc(found['error'])})")
            continue
        replicas = found.get("replicas") if isinstance(found.get("replicas"), dict) else {}
        replica = replicas.get(where)
        if not isinstance(replica, dict):
            lines.append(f"{esc(node)}: holds no replica of {esc(where)}")
            continue
        batches = _batches(replica)
        holding = [b for b in batches if any(_holds(b, o) for o in offsets)]
        if not holding:
            lines.append(
                f"{esc(node)}: no batch holds offset {esc(', '.join(map(str, offsets)))} (its log: log start "
                f"{esc(replica.get('log_start_offset'))}, end {esc(replica.get('log_end_offset'))}, "
                f"{esc(replica.get('batches_in_log'))} batch(es))"
            )
        ends = {id(m) for m in (_ending(batches, b) for b in holding) if m is not None}
        for batch in batches:
            last = _last(batch)
            kind = "holds" if batch in holding else "ends" if id(batch) in ends else ""
            if kind or any(batch["base_offset"] <= high and last >= low for low, high in ranges):
                shown.append((str(node), batch, kind))
    rows = [_row(*row) for row in _merged(shown)]
    table = (
        '<table class="batches"><thead><tr><th>node</th><th>offsets</th><th>producer id</th><th>epoch</th>'
        "<th>sequence</th><th>transactional</th><th>control marker</th><th>record values</th></tr></thead>"
        "<tbody>" + "".join(rows) + "</tbody></table>"
        if rows
        else ""
    )
    notes = '<ul class="note">' + "".join(f"<li>{line}</li>" for line in lines) + "</ul>" if lines else ""
    return (
        known_finding(evidence, example)
        + f'<div class="evidence"><p class="caption">The brokers\' own batches of {esc(where)} around offset '
        f"{esc(', '.join(map(str, offsets)))} (DumpLogSegments on each replica; highlighted: the batch holding "
        "the offset, and the control marker that ended its transaction)</p>"
        f"{table}{notes}</div>"
    )
