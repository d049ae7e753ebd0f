"""evidence/segments.json: the broker's own record of the partitions a run's anomalies name.

`gregor run` calls `collect` after the check, while the lab is still up, and
before the report (run.check_and_report). The instances of lost-write,
aborted-read and duplicate come first; other instances that name a key and
an offset follow while the partition cap allows. A system without segment
files says why in one line, and a failed collection records its reason:
either way the run's verdict and files stand.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ground.atomic import write_json
from harness.controller.known_findings import explain_run
from reports.stored_run import EVIDENCE_ANOMALIES, EVIDENCE_FILE

FIRST = EVIDENCE_ANOMALIES  # their instances come first
MAX_PARTITIONS = 20


def _offsets(example: dict) -> list[int]:
    found = example.get("offsets") if isinstance(example.get("offsets"), list) else [example.get("offset")]
    return [o for o in found if isinstance(o, int) and not isinstance(o, bool)]


def named_partitions(results: dict, keys: dict) -> tuple[list[dict], int]:
    """The partitions the results' instances name with an offset (FIRST's names first),
    each with its keys, offsets and anomaly names; and how many the cap left out."""
    anomalies = results.get("anomalies") if isinstance(results.get("anomalies"), dict) else {}
    order = [n for n in FIRST if n in anomalies] + sorted(n for n in anomalies if n not in FIRST)
    found: dict[tuple[str, int], dict] = {}
    for name in order:
        entry = anomalies.get(name) if isinstance(anomalies.get(name), dict) else {}
        for example in entry.get("examples") or []:
            where = keys.get(str(example.get("key"))) if isinstance(example, dict) else None
            offsets = _offsets(example) if where else []
            if not offsets or not isinstance(where, (list, tuple)) or len(where) != 2:
                continue
            partition = found.setdefault(
                (str(where[0]), int(where[1])),
                {"topic": str(where[0]), "partition": int(where[1]), "keys": [], "offsets": [], "anomalies": []},
            )
            for field, value in (("keys", example.get("key")), ("anomalies", name)):
                if value not in partition[field]:
                    partition[field].append(value)
            partition["offsets"] = sorted(set(partition["offsets"]) | set(offsets))
    listed = list(found.values())
    return listed[:MAX_PARTITIONS], max(0, len(listed) - MAX_PARTITIONS)


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def gather(lab, run_dir: Path) -> dict:
    """What evidence/segments.json holds for this run (never raises)."""
    system = lab.system
    evidence: dict = {"system": system.name, "version": getattr(lab, "version", None)}
    test, results = _read(run_dir / "test.json"), _read(run_dir / "results.json")
    if not results:
        evidence["note"] = "no results.json: the run was not checked, so no anomaly named a partition"
        return evidence
    _dump_segments(lab, test, results, evidence)
    try:
        evidence["known_findings"] = explain_run(run_dir, results, test, evidence)
    except (OSError, ValueError, KeyError, TypeError) as error:
        evidence["known_findings_error"] = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
    return evidence


def _dump_segments(lab, test: dict, results: dict, evidence: dict) -> None:
    """The brokers' batches of the partitions the instances name, into `evidence`
    (or a note of why there are none)."""
    system = lab.system
    dump = getattr(system, "segment_dump", None)
    if dump is None:
        reason = getattr(system, "no_segment_dump", "this system has no segment dump")
        evidence["note"] = f"no segment dump for {system.name}: {reason}"
        return
    partitions, left_out = named_partitions(results, test.get("keys") if isinstance(test.get("keys"), dict) else {})
    evidence["partitions"] = partitions
    evidence["max_partitions"] = MAX_PARTITIONS
    evidence["partitions_left_out"] = left_out
    if not partitions:
        evidence["note"] = "no anomaly instance named a partition and an offset: nothing to dump"
        return
    started = time.monotonic()
    try:
        evidence.update(dump(lab, {(p["topic"], p["partition"]): p["offsets"] for p in partitions}))
    except Exception as error:  # never cost the run its verdict or files: say why it is missing
        evidence["error"] = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
    evidence["seconds"] = round(time.monotonic() - started, 3)


def collect(lab, run_dir, progress=print) -> dict:
    """Writes run_dir/evidence/segments.json and says in one line what it holds."""
    run_dir = Path(run_dir)
    progress("evidence: reading the brokers' segments of the partitions the anomalies name")
    try:
        evidence = gather(lab, run_dir)
    except Exception as error:  # gather guards itself; this is the last net under the run's files
        evidence = {"error": str(error).splitlines()[0][:300] if str(error) else type(error).__name__}
    path = run_dir / EVIDENCE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, evidence, indent=None)
    failed = [f"{name}: {node['error']}" for name, node in (evidence.get("nodes") or {}).items() if "error" in node]
    if evidence.get("note") or evidence.get("error"):
        progress(f"evidence: {evidence.get('error') or evidence.get('note')} ({path})")
    else:
        progress(
            f"evidence: {len(evidence.get('partitions', []))} partition(s) from {len(evidence.get('nodes', {}))} "
            f"node(s) in {evidence.get('seconds')} s -> {path}" + (f"; failed: {'; '.join(failed)}" if failed else "")
        )
    return evidence
