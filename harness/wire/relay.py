"""A transparent, Kafka-aware TCP relay that aims faults at single requests.

Why: the transaction bugs that matter are races between single requests
(an EndTxn that arrives late, a Produce response that never arrives), and
faults on whole links or processes hit them only by luck.

How it sits on the path: it listens on 127.0.0.1 inside a network namespace,
and a REDIRECT rule in that namespace's nat OUTPUT chain sends the
namespace's new connections to the brokers' ports to it. It learns each
connection's original destination (SO_ORIGINAL_DST) and opens its own
connection there, marked (SO_MARK) so that the rule lets it pass. The rules
and the process carry a tag, so `sweep` finds and removes them after a crash.

What it does to the bytes: nothing, unless a rule says so. It cuts each
direction into frames, reads the request header (and the producer fields of
the transaction APIs, frames.py), and forwards every byte unchanged,
in order. Responses on a connection come back in request order, so each is
matched to the oldest request still waiting (Produce with acks=0 gets none).

Rules (added and removed at run time over a Unix socket of JSON lines,
control.py; removing one breaks no connection):
  delay          the request (or, with "on": "response", its response) is
                 forwarded delay_ms late; what follows it on the connection waits.
  hold           like delay, but if the client goes away before delay_ms the
                 request is still delivered, on the relay's own connection to
                 the broker, which stays open until it is answered.
  drop_response  the request reaches the broker; its response does not reach
                 the client, whose connection is then reset, as a broken link would.
  duplicate      the request is sent twice; the second response is swallowed.
A rule may be limited to an API, a transactional id, a producer id, a
destination, a count and a time window; each reports every request it took.

Traffic it cannot read (TLS, SASL that may encrypt) is refused: the
connection is reset and one line says why.

    python3 -m harness.wire.relay serve --tag T --dest 10.1.2.11:9092 --dest 10.1.2.12:9092
    python3 -m harness.wire.relay sweep --tag T [--prefix]     # ends its relays, removes its rules
"""

from __future__ import annotations

import argparse
import errno
import heapq
import itertools
import json
import os
import signal
import socket
import struct
import sys
import time
from collections import deque

from . import frames as kf
from .places import RELAY_MARK, Space, add_redirects, default_control, remove_redirects, remove_stale_socket, sweep
from .rules import Rule, parse_dest, wall
from .streams import READ, WRITE, Expect, Link, Poller

SO_ORIGINAL_DST = 80
SO_MARK = 36
CHUNK = 256 * 1024
HIGH_WATER = 4 * 1024 * 1024  # stop reading a side while this much waits for the other
ORPHAN_LINGER = 30.0  # seconds an orphaned upstream waits for its held requests' answers


class Relay:
    def __init__(
        self,
        tag: str,
        port: int,
        control: str,
        record: str | None = None,
        verbose: bool = False,
        netns: list[str] | None = None,
    ):
        self.tag = tag
        self.verbose = verbose  # one line per connection opened and closed, saying which side ended it
        # Frames of the APIs whose bodies are read, kept as test material (--record).
        self.record = open(record, "a", buffering=1) if record else None
        self.poller = Poller()
        self.spaces = [Space(name, port) for name in (netns or [None])]
        for space in self.spaces:
            self.poller.register(space.listener, READ, ("accept", space))
        self.port = self.spaces[0].port
        self.control_path = control
        remove_stale_socket(control)
        self.control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.control.bind(control)
        os.chmod(control, 0o600)
        self.control.listen(16)
        self.control.setblocking(False)
        self.poller.register(self.control, READ, ("control", None))
        self.wake_r, self._wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        signal.set_wakeup_fd(self._wake_w.fileno())
        self.poller.register(self.wake_r, READ, ("wake", None))
        self.links: dict[int, Link] = {}
        self.numbers = itertools.count(1)
        self.rules: list[Rule] = []
        self.rule_numbers = itertools.count(1)
        self.timers: list[tuple[float, int, int]] = []
        self.timer_order = itertools.count()
        self.stopping = False
        self.stats = {
            "accepted": 0,
            "refused": 0,
            "desync": 0,
            "upstream_failed": 0,
            "bytes_up": 0,
            "bytes_down": 0,
            "requests": 0,
            "responses": 0,
        }
        self.refusals: deque[str] = deque(maxlen=20)

    # -- loop --

    def run(self) -> None:
        while not self.stopping:
            timeout = max(0.0, self.timers[0][0] - time.monotonic()) if self.timers else None
            for (kind, link), mask, sock in self.poller.poll(timeout):
                if kind == "client":
                    if link.number in self.links:
                        self._client_event(link, mask)
                elif kind == "upstream":
                    if link.number in self.links:
                        self._upstream_event(link, mask)
                elif kind == "accept":
                    self._accept(link)  # here: the Space whose listener is ready
                elif kind == "control":
                    self._control_accept()
                elif kind == "ctl":
                    self._control_event(sock, link, mask)  # here: the control connection's state
                elif kind == "wake":
                    try:
                        self.wake_r.recv(512)
                    except BlockingIOError:
                        pass
            self._run_timers()
        for link in list(self.links.values()):
            self._close_link(link)

    def _schedule(self, link: Link, due: float) -> None:
        """One pending wake-up per link is enough: when it fires, _flush sets the next."""
        if link.wake is not None and link.wake <= due:
            return
        link.wake = due
        heapq.heappush(self.timers, (due, next(self.timer_order), link.number))

    def _run_timers(self) -> None:
        now = time.monotonic()
        touched = set()
        while self.timers and self.timers[0][0] <= now:
            due, _, number = heapq.heappop(self.timers)
            link = self.links.get(number)
            if link is not None and link.wake == due:
                link.wake = None
            touched.add(number)
        for number in touched:
            link = self.links.get(number)
            if link is None:
                continue
            if link.orphan_deadline is not None and now >= link.orphan_deadline:
                self._close_upstream(link)
                continue
            self._flush(link)

    # -- connections --

    def _accept(self, space: Space) -> None:
        while True:
            try:
                client, peer = space.listener.accept()
            except BlockingIOError:
                return
            except OSError as error:  # EMFILE and the like: leave it in the backlog
                print(f"accept failed: {error}", file=sys.stderr, flush=True)
                return
            self.stats["accepted"] += 1
            try:
                dest = original_destination(client)
            except OSError as error:
                _reset(client)
                self._refuse_line(f"connection from {peer[0]}:{peer[1]} has no original destination ({error})")
                continue
            if dest == ("127.0.0.1", space.port):
                _reset(client)
                self._refuse_line(f"connection from {peer[0]}:{peer[1]} came straight to the relay, not redirected")
                continue
            with space.entered():  # the client's own namespace: its routes, and the mark its rule skips
                upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            upstream.setsockopt(socket.SOL_SOCKET, SO_MARK, RELAY_MARK)
            for sock in (client, upstream):
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = Link(next(self.numbers), space, client, peer, upstream, dest)
            self.links[link.number] = link
            code = upstream.connect_ex(dest)
            if code not in (0, errno.EINPROGRESS):
                self.stats["upstream_failed"] += 1
                self._close_link(link, reset=True)
                continue
            if self.verbose:
                self._say(link, "opened")
            self.poller.register(client, READ, ("client", link))
            self.poller.register(upstream, WRITE, ("upstream", link))
            link.masks[client.fileno()] = READ
            link.masks[upstream.fileno()] = WRITE

    def _client_event(self, link: Link, mask: int) -> None:
        if mask & WRITE:
            link.client_blocked = False
        if mask & READ:
            self._read_client(link)
        if link.number in self.links:
            self._flush(link)

    def _upstream_event(self, link: Link, mask: int) -> None:
        if not link.connected:
            code = link.upstream.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                self.stats["upstream_failed"] += 1
                self._close_link(link, reset=True)  # the client sees what a refused connect would do to it
                return
            link.connected = True
        if mask & WRITE:
            link.upstream_blocked = False
        if mask & READ:
            self._read_upstream(link)
        if link.number in self.links:
            self._flush(link)

    def _read_client(self, link: Link) -> None:
        try:
            data = link.client.recv(CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            if self.verbose:
                self._say(link, "the client closed it")
            self._client_gone(link)
            return
        self.stats["bytes_up"] += len(data)
        first = link.requests.frames_seen == 0 and not link.requests.chunks
        try:
            frames = link.requests.feed(data)
        except kf.FrameError as error:
            if first and data[:1] == b"\x16" and data[1:2] == b"\x03":
                self._refuse(link, "it is TLS")
            else:
                self._refuse(link, f"it is not the Kafka protocol ({error})")
            return
        now = time.monotonic()
        for frame in frames:
            if not self._request(link, frame, now):
                return

    def _read_upstream(self, link: Link) -> None:
        try:
            data = link.upstream.recv(CHUNK)
        except BlockingIOError:
            return
        except OSError as error:
            if self.verbose:
                self._say(link, f"the broker's side failed ({error})")
            self._upstream_gone(link, reset=True)
            return
        if not data:
            if self.verbose:
                self._say(link, "the broker closed it")
            self._upstream_gone(link, reset=False)
            return
        self.stats["bytes_down"] += len(data)
        try:
            frames = link.responses.feed(data)
        except kf.FrameError as error:
            print(
                f"link {link.number} to {link.dest_text}: unreadable response ({error}); closing it",
                file=sys.stderr,
                flush=True,
            )
            self._close_link(link, reset=True)
            return
        now = time.monotonic()
        for frame in frames:
            self._response(link, frame, now)
            if link.number not in self.links:
                return

    # -- frames --

    def _request(self, link: Link, frame, now: float) -> bool:
        """Queues one request as the rules say; False if the connection was refused."""
        if not self.rules and self.record is None:
            try:
                key, version, correlation, answered = kf.quick_header(frame)
            except kf.FrameError as error:
                self._refuse(link, f"its request header is unreadable ({error})")
                return False
            if key != kf.SASL_HANDSHAKE:  # the common case, with nothing to decide: as cheap as it gets
                self.stats["requests"] += 1
                link.to_upstream.push(frame, answers=answered)
                if answered:
                    link.expected.append(Expect(correlation, key, version))
                return True
        try:
            request = kf.parse_request(frame)
        except kf.FrameError as error:
            self._refuse(link, f"its request header is unreadable ({error})")
            return False
        self.stats["requests"] += 1
        if self.record is not None:
            self._record(link, "request", request.api_key, request.api_version, frame)
        if request.api_key == kf.SASL_HANDSHAKE:
            mechanism = str(request.details.get("mechanism") or "").upper()
            if request.api_version == 0:
                self._refuse(link, "it uses SaslHandshake v0 (unframed SASL tokens)")
                return False
            if mechanism == "GSSAPI":
                self._refuse(link, "SASL GSSAPI may encrypt the traffic after authentication")
                return False
        rule = self._rule_for(request, link, now) if self.rules else None
        answers = 1 if request.expects_response else 0
        if rule is None:
            link.to_upstream.push(frame, answers=answers)
            if answers:
                link.expected.append(Expect(request.correlation_id, request.api_key, request.api_version))
            return True
        event = rule.record(
            {
                "t": wall(),
                "link": link.number,
                "client": link.peer,
                "dest": link.dest_text,
                **({"netns": link.space.name} if link.space.name else {}),
                **request.summary(),
            }
        )
        action = rule.action
        stamp = (event, "forwarded_at")
        if action == "delay" and rule.on == "request":
            link.to_upstream.push(frame, now + rule.delay, stamp, answers=answers)
        elif action == "hold":
            link.to_upstream.push(frame, now + rule.delay, stamp, held=True, answers=answers)
            link.held += 1
        else:
            link.to_upstream.push(frame, 0.0, stamp, answers=answers)
        if request.expects_response:
            if action == "delay" and rule.on == "response":
                link.expected.append(
                    Expect(request.correlation_id, request.api_key, request.api_version, "delay", rule.delay, event)
                )
            elif action == "drop_response":
                link.expected.append(
                    Expect(request.correlation_id, request.api_key, request.api_version, "drop", 0.0, event)
                )
            else:
                link.expected.append(
                    Expect(request.correlation_id, request.api_key, request.api_version, None, 0.0, event)
                )
        elif action in ("drop_response", "duplicate") or rule.on == "response":
            event["note"] = "no response (Produce acks=0)"
        if action == "duplicate":
            link.to_upstream.push(frame, answers=answers)
            if request.expects_response:
                link.expected.append(
                    Expect(request.correlation_id, request.api_key, request.api_version, "swallow", 0.0, event)
                )
        return True

    def _record(self, link: Link, direction: str, key: int, version: int, frame) -> None:
        if key in kf.BODY_PARSED and len(frame) <= 65536:
            self.record.write(
                json.dumps(
                    {
                        "link": link.number,
                        "dir": direction,
                        "api_key": key,
                        "version": version,
                        "hex": bytes(frame).hex(),
                    }
                )
                + "\n"
            )

    def _rule_for(self, request: kf.Request, link: Link, now: float) -> Rule | None:
        for rule in self.rules:
            if rule.takes(request, link.dest, link.space.name, now):
                return rule
        return None

    def _response(self, link: Link, frame, now: float) -> None:
        self.stats["responses"] += 1
        correlation = kf.response_correlation(frame)
        expect = self._match_response(link, correlation)
        event = expect.event if expect is not None else None
        if self.record is not None and expect is not None:
            self._record(link, "response", expect.key, expect.version, frame)
        if event is not None:
            answer = kf.parse_response(frame, expect.key, expect.version)
            key = "duplicate_response" if expect.action == "swallow" else "response"
            event[key] = {"at": wall(), "correlation_id": correlation, **answer}
        if expect is not None and expect.action == "swallow":
            self._orphan_check(link)
            return
        if expect is not None and expect.action == "drop":
            event["response_dropped"] = True
            if self.verbose:
                self._say(link, f"a drop_response rule swallowed answer {correlation} and resets the client")
            event["client_reset_at"] = wall()
            self._client_gone(link, reset=True)
            return
        if not link.client_open:
            self._orphan_check(link)
            return
        if expect is not None and expect.action == "delay":
            link.to_client.push(frame, now + expect.delay, (event, "response_forwarded_at"))
        else:
            link.to_client.push(frame)

    def _match_response(self, link: Link, correlation: int) -> Expect | None:
        """The request this response answers: the oldest one waiting. A mismatch means this
        relay misread a request (it never happens with a correct parser); it is counted, and
        the waiting list is resynchronised on the correlation id if it can be."""
        if link.expected and link.expected[0].correlation == correlation:
            return link.expected.popleft()
        self.stats["desync"] += 1
        print(
            f"link {link.number} to {link.dest_text}: response {correlation} was not the next expected "
            f"({link.expected[0].correlation if link.expected else 'none'})",
            file=sys.stderr,
            flush=True,
        )
        for position, expect in enumerate(link.expected):
            if expect.correlation == correlation:
                for _ in range(position + 1):
                    found = link.expected.popleft()
                return found
        return None

    # -- writing and interest --

    def _flush(self, link: Link) -> None:
        """Writes what is due both ways, closes what is finished, and sets the next wake-up."""
        now = time.monotonic()
        if link.connected and link.upstream_open and not link.upstream_blocked and link.to_upstream.items:
            try:
                link.upstream_blocked, held_sent = link.to_upstream.flush(link.upstream, now)
            except OSError:
                self._upstream_gone(link, reset=True)
                return
            if held_sent:
                link.held -= held_sent
                if not link.client_open:
                    link.orphan_deadline = now + ORPHAN_LINGER
        if link.client_open and not link.client_blocked and link.to_client.items:
            try:
                link.client_blocked, _ = link.to_client.flush(link.client, now)
            except OSError:
                self._client_gone(link)
                return
        if link.closing_client and link.client_open and not link.to_client.items:
            self._close_client(link, reset=False)
        if not link.client_open:
            self._orphan_check(link)
        if link.number not in self.links:
            return
        self._update_interest(link)
        wakes = [
            due
            for due in (link.to_upstream.head_due(), link.to_client.head_due(), link.orphan_deadline)
            if due is not None and due > now
        ]
        if wakes:
            self._schedule(link, min(wakes))

    def _update_interest(self, link: Link) -> None:
        if link.client_open:
            mask = 0
            if link.to_upstream.size < HIGH_WATER and not link.closing_client:
                mask |= READ
            if link.client_blocked:
                mask |= WRITE
            self._set_mask(link, link.client, mask)
        if link.upstream_open:
            mask = 0
            if not link.connected or link.upstream_blocked:
                mask |= WRITE
            if link.connected and link.to_client.size < HIGH_WATER:
                mask |= READ
            self._set_mask(link, link.upstream, mask)

    def _set_mask(self, link: Link, sock: socket.socket, mask: int) -> None:
        fd = sock.fileno()
        if link.masks.get(fd) == mask:
            return
        if mask == 0:
            self.poller.unregister(sock)
        elif link.masks.get(fd):
            self.poller.modify(sock, mask)
        else:
            self.poller.register(sock, mask, ("client" if sock is link.client else "upstream", link))
        link.masks[fd] = mask

    # -- ends of connections --

    def _client_gone(self, link: Link, reset: bool = False) -> None:
        """The client closed (or a drop_response rule broke the link): held requests outlive it."""
        if not link.client_open:
            return
        self._close_client(link, reset)
        link.to_client.clear()
        link.held, unanswered = link.to_upstream.keep_through_last_held()
        for _ in range(unanswered):
            link.expected.pop()  # those requests will never be sent
        if link.held:
            return  # delivered when due; then the answers are awaited (ORPHAN_LINGER)
        self._close_upstream(link)

    def _orphan_check(self, link: Link) -> None:
        if link.client_open or not link.upstream_open:
            return
        if link.held == 0 and not link.to_upstream.items and not link.expected:
            self._close_upstream(link)

    def _upstream_gone(self, link: Link, reset: bool) -> None:
        for item in link.to_upstream.items:
            if item[2] is not None and item[3]:
                item[2][0]["lost"] = "the broker's connection closed before delivery"
        link.to_upstream.clear()
        link.held = 0
        self._close_upstream(link)
        if link.client_open:
            if reset:
                self._close_client(link, reset=True)
            else:
                link.closing_client = True
                self._flush(link)

    def _close_client(self, link: Link, reset: bool) -> None:
        if not link.client_open:
            return
        link.client_open = False
        self._forget(link, link.client)
        if reset:
            _reset(link.client)
        else:
            link.client.close()
        if not link.upstream_open:
            self.links.pop(link.number, None)

    def _close_upstream(self, link: Link) -> None:
        if not link.upstream_open:
            return
        link.upstream_open = False
        self._forget(link, link.upstream)
        link.upstream.close()
        if not link.client_open:
            self.links.pop(link.number, None)

    def _forget(self, link: Link, sock: socket.socket) -> None:
        fd = sock.fileno()
        if link.masks.get(fd):
            self.poller.unregister(sock)
        link.masks[fd] = 0

    def _close_link(self, link: Link, reset: bool = False) -> None:
        self._close_client(link, reset)
        self._close_upstream(link)
        self.links.pop(link.number, None)

    def _say(self, link: Link, what: str) -> None:
        print(
            f"{time.strftime('%H:%M:%S')} link {link.number} {link.peer} -> {link.dest_text}: {what}",
            file=sys.stderr,
            flush=True,
        )

    def _refuse(self, link: Link, why: str) -> None:
        self._refuse_line(
            f"refused connection {link.number} from {link.peer} to {link.dest_text}: {why}; "
            "the wire relay reads only PLAINTEXT or SASL_PLAINTEXT (PLAIN, SCRAM) traffic"
        )
        self._close_link(link, reset=True)

    def _refuse_line(self, line: str) -> None:
        self.stats["refused"] += 1
        self.refusals.append(line)
        print(line, file=sys.stderr, flush=True)

    # -- control channel: one JSON object per line in, one per line out --

    def _control_accept(self) -> None:
        while True:
            try:
                conn, _ = self.control.accept()
            except BlockingIOError:
                return
            conn.setblocking(False)
            self.poller.register(conn, READ, ("ctl", {"in": b"", "out": b""}))

    def _control_event(self, conn: socket.socket, state: dict, mask: int) -> None:
        try:
            if mask & READ:
                data = conn.recv(65536)
                if not data:
                    raise ConnectionError
                state["in"] += data
                while b"\n" in state["in"]:
                    line, state["in"] = state["in"].split(b"\n", 1)
                    if line.strip():
                        state["out"] += json.dumps(self.command(line)).encode() + b"\n"
            if state["out"]:
                sent = conn.send(state["out"])
                state["out"] = state["out"][sent:]
            self.poller.modify(conn, READ | (WRITE if state["out"] else 0))
        except BlockingIOError:
            self.poller.modify(conn, READ | WRITE)
        except OSError:
            self.poller.unregister(conn)
            conn.close()

    def command(self, line: bytes) -> dict:
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("send one JSON object per line")
            op = request.get("op")
            handler = getattr(self, f"_op_{op}", None) if isinstance(op, str) else None
            if handler is None:
                raise ValueError(f"unknown op {op!r}; use add, remove, clear, report, status or links")
            return {"ok": True, **handler(request)}
        except (ValueError, TypeError, KeyError) as error:
            return {"ok": False, "error": str(error)}

    def _op_add(self, request: dict) -> dict:
        spec = request.get("rule")
        if not isinstance(spec, dict):
            raise ValueError('add needs "rule": {...}')
        rule = Rule(spec, time.monotonic())
        if not rule.id:
            rule.id = f"r{next(self.rule_numbers)}"
            rule.spec["id"] = rule.id
        if any(existing.id == rule.id for existing in self.rules):
            raise ValueError(f"a rule {rule.id!r} is already in place; remove it first")
        self.rules.append(rule)
        return {"id": rule.id}

    def _op_remove(self, request: dict) -> dict:
        rule_id = str(request.get("id"))
        for rule in self.rules:
            if rule.id == rule_id:
                self.rules.remove(rule)
                return {"report": rule.report(time.monotonic())}
        raise ValueError(f"no rule {rule_id!r} in place")

    def _op_clear(self, request: dict) -> dict:
        now = time.monotonic()
        reports = [rule.report(now) for rule in self.rules]
        self.rules.clear()
        return {"reports": reports}

    def _op_report(self, request: dict) -> dict:
        now = time.monotonic()
        wanted = request.get("id")
        return {"reports": [rule.report(now) for rule in self.rules if wanted is None or rule.id == str(wanted)]}

    def _op_status(self, request: dict) -> dict:
        return {
            "tag": self.tag,
            "port": self.port,
            "pid": os.getpid(),
            "links": len(self.links),
            "netns": {space.name or "": space.port for space in self.spaces},
            "orphans": sum(1 for link in self.links.values() if not link.client_open),
            "rules": [rule.id for rule in self.rules],
            **self.stats,
            "refusals": list(self.refusals),
        }

    def _op_links(self, request: dict) -> dict:
        """Each connection and the requests still waiting for an answer on it (oldest first)."""
        now = time.monotonic()
        return {
            "links": [
                {
                    "link": link.number,
                    "netns": link.space.name,
                    "client": link.peer,
                    "dest": link.dest_text,
                    "connected": link.connected,
                    "client_open": link.client_open,
                    "held": link.held,
                    "queued_up": link.to_upstream.size,
                    "queued_down": link.to_client.size,
                    "waiting": [
                        {
                            "api": kf.api_name(e.key),
                            "version": e.version,
                            "correlation_id": e.correlation,
                            "age_s": round(now - e.since, 3),
                            **({"action": e.action} if e.action else {}),
                        }
                        for e in list(link.expected)[:20]
                    ],
                }
                for link in self.links.values()
            ]
        }

    def close(self) -> None:
        for sock in (self.control, self.wake_r, self._wake_w):
            sock.close()
        for space in self.spaces:
            space.close()
        if self.record is not None:
            self.record.close()
        remove_stale_socket(self.control_path)


def original_destination(sock: socket.socket) -> tuple[str, int]:
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port, address = struct.unpack_from("!2xH4s", raw)
    return socket.inet_ntoa(address), port


def _reset(sock: socket.socket) -> None:
    """Closes with a RST, as a broken link shows itself."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def _parse_dest(text: str) -> tuple[str | None, int]:
    host, port = parse_dest(text)
    if port is None:
        raise argparse.ArgumentTypeError(f"bad --dest {text!r}: give HOST:PORT or :PORT (every host)")
    return host, port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="relay this namespace's connections to --dest")
    serve.add_argument("--tag", required=True, help="names its rules and process, so a sweep finds them")
    serve.add_argument(
        "--dest",
        action="append",
        type=_parse_dest,
        default=[],
        help="HOST:PORT (or :PORT, any host) whose new connections are redirected; repeatable",
    )
    serve.add_argument("--port", type=int, default=0, help="where it listens on 127.0.0.1 (default: any free port)")
    serve.add_argument("--control", help="its Unix control socket (default /tmp/gregor-wire-TAG.sock)")
    serve.add_argument("--no-redirect", action="store_true", help="add no REDIRECT rule (the caller does)")
    serve.add_argument("--record", help="append the frames of the APIs it parses to this file (JSON lines)")
    serve.add_argument("--verbose", action="store_true", help="a line per connection opened and closed (stderr)")
    serve.add_argument(
        "--netns",
        action="append",
        default=[],
        help="serve this named network namespace (repeatable; default: the one it runs in)",
    )
    swept = commands.add_parser("sweep", help="end the tag's relays and remove its rules in this namespace")
    swept.add_argument("--tag", required=True)
    swept.add_argument("--prefix", action="store_true", help="every tag that starts with --tag")
    swept.add_argument(
        "--netns", action="append", default=[], help="also remove its rules in this named namespace (repeatable)"
    )
    args = parser.parse_args(argv)
    if args.command == "sweep":
        print(json.dumps(sweep(args.tag, args.prefix, args.netns)))
        return 0
    if not args.dest and not args.no_redirect:
        parser.error("give at least one --dest (or --no-redirect)")
    relay = Relay(args.tag, args.port, args.control or default_control(args.tag), args.record, args.verbose, args.netns)

    def stop(_signum, _frame):
        relay.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        if not args.no_redirect:
            for space in relay.spaces:
                with space.entered():
                    add_redirects(args.tag, args.dest, space.port)
        print(
            json.dumps(
                {
                    "ready": True,
                    "port": relay.port,
                    "control": relay.control_path,
                    "netns": {space.name or "": space.port for space in relay.spaces},
                }
            ),
            flush=True,
        )
        relay.run()
    finally:
        if not args.no_redirect:
            for space in relay.spaces:  # first, so new connections go straight to the brokers
                with space.entered():
                    remove_redirects(args.tag)
        relay.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
