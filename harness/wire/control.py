"""Talks to a running wire relay (harness/wire/relay.py) over its Unix control socket.

Why a separate file: the controller imports `call` without loading the relay;
on a node (broker sources, later) it runs as a command. Standard library only.

    python3 -m harness.wire.control --tag T add action=drop_response api=Produce transactional_id=tx-1 count=1
    python3 -m harness.wire.control --tag T add action=delay delay_ms=500 api=EndTxn on=response for_ms=10000
    python3 -m harness.wire.control --tag T report [ID]      # what each rule took (and did)
    python3 -m harness.wire.control --tag T remove ID        # the rule's final report
    python3 -m harness.wire.control --tag T clear            # every rule off, their reports
    python3 -m harness.wire.control --tag T status
    python3 -m harness.wire.control --tag T links            # each connection, and what waits for an answer on it
    python3 -m harness.wire.control --tag T raw '{"op": "status"}'
"""

from __future__ import annotations

import argparse
import json
import socket
import sys

from .places import default_control


class RelayError(RuntimeError):
    """The relay refused the request (its one-line reason) or could not be reached."""


def call(path: str, request: dict, timeout: float = 10.0) -> dict:
    """Sends one request, returns the relay's answer; RelayError if it says no."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(path)
            sock.sendall(json.dumps(request).encode() + b"\n")
            reply = b""
            while not reply.endswith(b"\n"):
                chunk = sock.recv(1 << 20)
                if not chunk:
                    break
                reply += chunk
    except OSError as error:
        raise RelayError(f"no wire relay answers on {path}: {error}") from None
    if not reply:
        raise RelayError(f"the wire relay on {path} closed without answering")
    answer = json.loads(reply)
    if not answer.get("ok"):
        raise RelayError(answer.get("error", "refused"))
    return answer


def _value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def rule_from(pairs: list[str]) -> dict:
    rule = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"bad rule field {pair!r}; write KEY=VALUE, e.g. api=EndTxn")
        # ids and names stay text even when they look like numbers
        rule[key] = value if key in ("id", "transactional_id", "dest", "api", "action", "on") else _value(value)
    return rule


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--tag", help="the relay's tag (its socket is /tmp/gregor-wire-TAG.sock)")
    where.add_argument("--control", help="the relay's control socket")
    parser.add_argument("op", choices=("add", "remove", "clear", "report", "status", "links", "raw"))
    parser.add_argument("args", nargs="*")
    args = parser.parse_args(argv)
    path = args.control or default_control(args.tag)
    if args.op == "add":
        request = {"op": "add", "rule": rule_from(args.args)}
    elif args.op in ("remove", "report"):
        request = {"op": args.op, **({"id": args.args[0]} if args.args else {})}
    elif args.op == "raw":
        request = json.loads(args.args[0])
    else:
        request = {"op": args.op}
    try:
        answer = call(path, request)
    except RelayError as error:
        print(error, file=sys.stderr)
        return 1
    print(json.dumps(answer, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
