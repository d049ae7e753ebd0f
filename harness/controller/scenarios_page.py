"""store/scenarios/<time>/index.html: one row per claim, a column per side.

Each cell: how many runs detected the claim (unsafe) or stayed free of bad
anomalies (safe), the median time to the first anomaly that counts, the
anomalies found with their counts (red: bad, grey: permitted by the run's
settings), and a link to each run's report. A safe side with a bad anomaly
is a red finding. Everything comes from scenarios.json; nothing is
recomputed from histories. Untrusted text (settings, error text) is escaped.
"""

from __future__ import annotations

from pathlib import Path

from ground.atomic import write_atomic
from reports.markup import esc
from reports.style import CSS

PAGE_CSS = """
table.claims{width:calc(100% - 48px);margin:10px 24px}
table.claims td{padding:8px 10px}
td.claim .name{font-weight:800;font-size:16px}
td.claim .promise{margin-top:4px;max-width:460px}
td.claim .note{margin-top:6px;max-width:460px;color:#555;font-size:12px}
td.side{min-width:300px}
td.side .rate{font-size:20px;font-weight:800}
td.side .settings{font-family:ui-monospace,monospace;font-size:12px;color:#333;margin-bottom:4px;word-break:break-word}
td.side.shown{background:#eef7f0}
td.side.notshown{background:#fff7e0}
td.side.clean{background:#eef7f0}
td.side.finding{background:#fde2e5;border:2px solid #c0172b}
td.side.finding .rate{color:#c0172b}
td.side.pending{background:#f3f4f6;color:#666}
.runs a,.runs span{margin-right:6px;font-size:12px}
.runs .hit{font-weight:700}
.runs .error{color:#c0172b}
.badges{margin:4px 0}
.badge{margin:1px}
details.argv{font-size:11px;color:#555;margin-top:4px}
details.argv code{word-break:break-all}
.head{margin:14px 24px}
"""


def write_page(directory: Path, summary: dict) -> Path:
    path = Path(directory) / "index.html"
    write_atomic(path, render(summary))
    return path


def render(summary: dict) -> str:
    rows = "".join(claim_row(c, summary) for c in summary.get("claims", []))
    findings = [c["name"] for c in summary.get("claims", []) if c["figures"]["safe"]["hits"]]
    state = "finished" if summary.get("finished") else "in progress (this page is rewritten after every run)"
    finding_line = (
        f'<p class="err">Red findings: the safe side of {esc(", ".join(findings))} showed bad anomalies.</p>'
        if findings
        else ""
    )
    command = summary.get("command")
    head = (
        f'<div class="head"><h2>Gregor: the guarantee catalogue</h2>'
        f"<p>Each claim run {esc(summary.get('runs_per_side'))} time(s) per side, "
        f"{esc(summary.get('time_limit_s'))} s each, seeds from {esc(summary.get('seed'))}, on the "
        f"{esc(summary.get('backend'))} backend with {esc(summary.get('system'))} "
        f"{esc(summary.get('version') or '(its default version, where a claim pins none)')}; "
        f"started {esc(summary.get('started'))}, {esc(state)}."
        + (f" Command: <code>{esc(command)}</code>." if command else "")
        + '</p><p class="note">Unsafe column: runs in which an expected anomaly appeared (the claim shown '
        "broken). Safe column: runs with no bad anomaly (the promise kept); a bad anomaly there is a red "
        "finding. Times are seconds from the start of a run to its first anomaly that counts.</p>"
        + finding_line
        + "</div>"
    )
    table = (
        '<table class="claims"><thead><tr><th>claim</th><th>client</th><th>unsafe side</th><th>safe side</th>'
        f"</tr></thead><tbody>{rows}</tbody></table>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">'
        f"<title>Gregor scenarios</title><style>{CSS}{PAGE_CSS}</style></head><body>{head}{table}"
        "</body></html>\n"
    )


def claim_row(claim: dict, summary: dict) -> str:
    lab = ", ".join(f"{k}={v}" for k, v in sorted(claim.get("lab", {}).items()))
    extra = []
    if lab:
        extra.append(f"lab: {lab}")
    if claim.get("storage", "disk") != "disk":
        extra.append(f"storage: {claim['storage']}")
    note = claim.get("note") or ""
    cell = (
        f'<td class="claim"><div class="name" id="{esc(claim["name"])}">{esc(claim["name"])}</div>'
        f'<div class="promise">{esc(claim["promise"])}</div>'
        f'<div class="note">expected on the unsafe side: {esc(", ".join(claim["expected"]))}</div>'
        + (f'<div class="note">{esc(note)}</div>' if note else "")
        + "".join(f'<div class="note">{esc(e)}</div>' for e in extra)
        + "</td>"
    )
    return f"<tr>{cell}{client_cell(claim, summary)}{side_cell(claim, 'unsafe')}{side_cell(claim, 'safe')}</tr>"


def client_cell(claim: dict, summary: dict) -> str:
    """The client library of the claim's runs (per side where a claim pins them apart); a
    catalogue written before the Java client ran librdkafka everywhere."""
    default = summary.get("client") or "librdkafka"
    clients = {side: claim["sides"][side].get("client") or default for side in ("unsafe", "safe")}
    version = summary.get("client_version")
    if clients["unsafe"] == clients["safe"]:
        text = clients["safe"] + (f" {version}" if version and clients["safe"] == default else "")
    else:
        text = f"unsafe: {clients['unsafe']}, safe: {clients['safe']}"
    return f'<td class="client">{esc(text)}</td>'


def side_cell(claim: dict, side: str) -> str:
    figures = claim["figures"][side]
    entry = claim["sides"][side]
    runs = entry["runs"]
    done = figures["completed"]
    if not runs:
        kind, rate = "pending", "not run yet"
    elif side == "unsafe":
        kind = "shown" if figures["hits"] else "notshown"
        rate = f"detected in {figures['hits']}/{done} run{'s' if done != 1 else ''}"
    else:
        clean = done - figures["hits"]
        kind = "finding" if figures["hits"] else "clean"
        rate = f"no bad anomaly in {clean}/{done} run{'s' if done != 1 else ''}"
    if figures["errors"]:
        rate += f" ({figures['errors']} failed)"
    median = figures.get("median_first_s")
    timing = (
        f"<div>median time to the first {'expected' if side == 'unsafe' else 'bad'} anomaly: {esc(median)} s</div>"
        if median is not None
        else ""
    )
    badges = "".join(
        f'<span class="badge {"permitted" if a["allowed"] else "bad"}" title="{esc(a.get("why_allowed") or "bad")}">'
        f"{esc(name)} {esc(a['count'])} (in {esc(a['runs'])} run{'s' if a['runs'] != 1 else ''})</span>"
        for name, a in figures["anomalies"].items()
    )
    links = "".join(run_link(i, run, side) for i, run in enumerate(runs, 1))
    return (
        f'<td class="side {kind}"><div class="settings">{esc(entry["settings"])}</div>'
        f'<div class="rate">{esc(rate)}</div>{timing}{truncation_note(figures)}'
        f'<div class="badges">{badges or "<span class=note>no anomaly</span>"}</div>'
        f'<div class="runs">{links}</div>'
        f'<details class="argv"><summary>gregor run arguments</summary><code>{esc(" ".join(entry["arguments"]))}'
        "</code></details></td>"
    )


def truncation_note(figures: dict) -> str:
    """A side's runs whose final drain found a key's log ending below an
    acknowledged offset (docs/SCENARIOS.md)."""
    truncated, runs = figures["truncated"], figures["runs"]
    if not truncated:
        return ""
    return (
        f'<div class="note truncation">logs truncated below acknowledged offsets in {truncated}/{runs} '
        f'run{"s" if runs != 1 else ""} (each report\'s "Truncated logs")</div>'
    )


def run_link(number: int, run: dict, side: str) -> str:
    if run.get("error"):
        target = run.get("log") or run.get("run_dir")
        title = esc(run["error"])
        if target:
            return f'<a class="error" href="{esc(target)}" title="{title}">run {number}: error</a>'
        return f'<span class="error" title="{title}">run {number}: error</span>'
    hit = run["detected"] if side == "unsafe" else not run["clean"]
    mark = ("detected" if hit else "not detected") if side == "unsafe" else ("BAD" if hit else "clean")
    if run.get("truncated"):
        mark += ", log truncated"
    return (
        f'<a class="{"hit" if hit else ""}" href="{esc(run["report"])}" '
        f'title="seed {esc(run.get("seed"))}, verdict {esc(run.get("verdict"))}">run {number}: {mark}</a>'
    )
