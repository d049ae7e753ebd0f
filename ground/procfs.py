"""Reading /proc on the controller host: a process's state, start time and command line.

The one reader for everything that signals local processes: nodes of the
local backend, paused clients, the client registry. The start time tells a
process from a later one that reused its pid, so nobody ever signals a stranger.
"""

from __future__ import annotations

from pathlib import Path


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks), or None if there is no such process."""
    try:
        text = Path(f"/proc/{int(pid)}/stat").read_text(errors="replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # the command name (field 2) may hold spaces and parentheses
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def proc_state(pid: int) -> str | None:
    """The one-letter state ('R', 'S', 'T' stopped, 'Z' ...), or None if gone."""
    stat = proc_stat(pid)
    return stat[0] if stat else None


def proc_cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def identity(pid: int) -> dict | None:
    """What identifies a process across pid reuse: {"pid", "starttime"}."""
    stat = proc_stat(pid)
    return {"pid": int(pid), "starttime": stat[1]} if stat else None


def same_process(ident: dict) -> bool:
    stat = proc_stat(ident["pid"])
    return stat is not None and stat[1] == ident.get("starttime")
