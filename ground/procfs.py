"""Reading /proc on the controller host: a process's state, start time and command line.

The one reader for everything that signals local processes: nodes of the
local backend, paused clients, the client registry. The start time tells a
process from a later one that reused its pid, so nobody ever signals a stranger.
"""

from __future__ import annotations

from pathlib import Path


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name, or None if there is no such process."""
    try:
        text = Path(f"/proc/{int(pid)}/stat").read_text(errors="replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # the command name (field 2) may hold spaces and parentheses
    return text[text.rindex(")") + 2 :].split()


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks), or None if there is no such process."""
    fields = _stat_fields(pid)
    return (fields[0], int(fields[19])) if fields else None


def group_members(pgid: int) -> list[int]:
    """The processes of process group `pgid` (a client and its JVM), by pid."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and int(fields[2]) == pgid:
                found.append(int(entry.name))
    return found


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
