"""The wire relay's byte plumbing: frames cut from a stream, frames queued with due times, the
responses a connection waits for, and the epoll loop's wait.

Why apart: this is the part every byte goes through; it knows nothing of rules or namespaces.
"""

from __future__ import annotations

import select
import socket
import time
from collections import deque
from typing import TYPE_CHECKING

from . import frames as kf
from .rules import wall

if TYPE_CHECKING:
    from .places import Space

READ, WRITE = select.EPOLLIN, select.EPOLLOUT
_TROUBLE = select.EPOLLERR | select.EPOLLHUP


class FrameReader:
    """Cuts a byte stream into whole frames (size prefix included), copying as little as it can."""

    __slots__ = ("chunks", "have", "need", "frames_seen")

    def __init__(self):
        self.chunks: list[bytes] = []
        self.have = 0
        self.need = 4
        self.frames_seen = 0

    def feed(self, data: bytes) -> list[memoryview]:
        self.chunks.append(data)
        self.have += len(data)
        if self.have < self.need:
            return []
        buffer = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
        view, at, end, frames = memoryview(buffer), 0, len(buffer), []
        self.need = 4
        while end - at >= 4:
            size = kf.frame_size(view[at : at + 4])
            if end - at < 4 + size:
                self.need = 4 + size
                break
            frames.append(view[at : at + 4 + size])
            at += 4 + size
        self.frames_seen += len(frames)
        rest = buffer[at:] if at < end else b""
        self.chunks = [rest] if rest else []
        self.have = len(rest)
        if rest and self.need == 4 and len(rest) >= 4:
            self.need = 4 + kf.frame_size(rest)
        return frames


class Outbound:
    """Frames waiting to be written to one socket, each not before its due time, in order."""

    __slots__ = ("items", "size")

    def __init__(self):
        # [due, view, (event, key) stamped with the time it is written or None, held,
        #  how many responses the frame is expected to bring]
        self.items: deque[list] = deque()
        self.size = 0

    def push(
        self, view, due: float = 0.0, stamp: tuple[dict, str] | None = None, held: bool = False, answers: int = 0
    ) -> None:
        self.items.append([due, view, stamp, held, answers])
        self.size += len(view)

    def head_due(self) -> float | None:
        return self.items[0][0] if self.items else None

    def flush(self, sock: socket.socket, now: float) -> tuple[bool, int]:
        """Writes what is due, in order; (whether the socket filled up, held frames sent)."""
        held_sent = 0
        while self.items and self.items[0][0] <= now:
            buffers = []
            for item in self.items:
                if item[0] > now or len(buffers) == 256:
                    break
                buffers.append(item[1])
            try:
                sent = sock.sendmsg(buffers)
            except BlockingIOError:
                return True, held_sent
            self.size -= sent
            for view in buffers:
                item = self.items[0]
                if sent < len(view):
                    item[1] = view[sent:]
                    return True, held_sent  # a short write: the socket is full
                sent -= len(view)
                self.items.popleft()
                if item[2] is not None and item[2][1] not in item[2][0]:
                    item[2][0][item[2][1]] = wall()
                held_sent += item[3]
        return False, held_sent

    def keep_through_last_held(self) -> tuple[int, int]:
        """The client has gone: only held frames (and what precedes them) are still delivered.
        Returns (held frames kept, expected responses of the frames dropped)."""
        answers = 0
        while self.items and not self.items[-1][3]:
            dropped = self.items.pop()
            self.size -= len(dropped[1])
            answers += dropped[4]
        return sum(item[3] for item in self.items), answers

    def clear(self) -> None:
        self.items.clear()
        self.size = 0


class Expect:
    """A request waiting for its response, and what to do with that response."""

    __slots__ = ("correlation", "key", "version", "action", "delay", "event", "since")

    def __init__(self, correlation, key, version, action=None, delay=0.0, event=None):
        self.correlation, self.key, self.version = correlation, key, version
        self.action, self.delay, self.event = action, delay, event
        self.since = time.monotonic()


class Link:
    """One client connection and the relay's own connection to where the client meant to go."""

    def __init__(
        self, number: int, space: Space, client: socket.socket, peer, upstream: socket.socket, dest: tuple[str, int]
    ):
        self.number = number
        self.space = space
        self.client, self.upstream = client, upstream
        self.peer = f"{peer[0]}:{peer[1]}"
        self.dest = dest
        self.dest_text = f"{dest[0]}:{dest[1]}"
        self.requests, self.responses = FrameReader(), FrameReader()
        self.to_upstream, self.to_client = Outbound(), Outbound()
        self.expected: deque[Expect] = deque()
        self.connected = False
        self.client_open = self.upstream_open = True
        self.closing_client = False  # the broker closed: the client gets what is queued, then EOF
        self.held = 0
        self.orphan_deadline: float | None = None
        self.wake: float | None = None  # the time of this link's pending timer
        self.masks = {client.fileno(): 0, upstream.fileno(): 0}
        self.client_blocked = self.upstream_blocked = False


class Poller:
    """epoll with a value kept per socket: the loop's only wait. (selectors costs more per event, and the
    relay's cost is per event.) An error or hang-up is reported as readable and writable, so the handler
    that reads (or checks a connect) meets it."""

    def __init__(self):
        self.epoll = select.epoll()
        self.values: dict[int, tuple] = {}

    def register(self, sock: socket.socket, mask: int, value) -> None:
        self.epoll.register(sock.fileno(), mask)
        self.values[sock.fileno()] = (value, sock)

    def modify(self, sock: socket.socket, mask: int) -> None:
        self.epoll.modify(sock.fileno(), mask)

    def unregister(self, sock: socket.socket) -> None:
        fd = sock.fileno()
        if self.values.pop(fd, None) is not None:
            self.epoll.unregister(fd)

    def poll(self, timeout: float | None) -> list:
        ready = []
        for fd, mask in self.epoll.poll(-1 if timeout is None else timeout):
            entry = self.values.get(fd)
            if entry is not None:
                if mask & _TROUBLE:
                    mask |= READ | WRITE
                ready.append((entry[0], mask, entry[1]))
        return ready
