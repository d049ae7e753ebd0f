"""A small EDN reader and writer of our own, for Jepsen and Elle histories.

Why not a library: we need to stream a history.edn of millions of ops one
top-level form at a time (a Jepsen history is a sequence of maps, or one big
vector of them), and to write the exact shapes Jepsen's Kafka checker and Elle
read. The reader tokenizes a buffered window of the file with one regular
expression, so memory stays bounded by the largest single form.

Mapping to Python: map -> dict (unhashable keys become tuples), vector ->
list, list -> tuple, set -> frozenset, keyword -> Keyword, symbol -> Symbol,
nil/true/false -> None/True/False, 12N -> int, 1.5M -> Decimal, 1/3 ->
Fraction, a tagged map such as #jepsen.history.Op{...} -> the map itself,
other tagged literals -> Tagged(tag, value).
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, Iterator, TextIO

from ground.errors import GregorError


@dataclass(frozen=True, slots=True)
class Keyword:
    """An EDN keyword such as :send (name without the colon)."""

    name: str

    def __str__(self) -> str:
        return ":" + self.name


@dataclass(frozen=True, slots=True)
class Symbol:
    """An EDN symbol such as foo/bar."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Tagged:
    """A tagged literal whose tag we do not interpret, e.g. #inst "..."."""

    tag: str
    value: Any


def kw(name: str) -> Keyword:
    """Shorthand for building keywords in code and tests."""
    return Keyword(name)


class EdnError(GregorError):
    """Malformed EDN: the message names the line and the problem."""


_CHARS = {"newline": "\n", "return": "\r", "space": " ", "tab": "\t", "formfeed": "\f", "backspace": "\b"}
_STRING_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}

# One token at a time. Whitespace includes commas; comments run to line end.
_TOKEN = re.compile(
    r"""
    (?P<ws>[\s,]+|;[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<open>\#\{|[\[({])
  | (?P<close>[\])}])
  | (?P<discard>\#_)
  | (?P<tag>\#[A-Za-z][^\s,\[\](){}"\\;]*)
  | (?P<symbolic>\#\#[A-Za-z]+)
  | (?P<char>\\(?:newline|return|space|tab|formfeed|backspace|u[0-9a-fA-F]{4}|.))
  | (?P<atom>[^\s,\[\](){}"\\;\#][^\s,\[\](){}"\\;]*)
""",
    re.VERBOSE | re.DOTALL,
)

_INT = re.compile(r"[+-]?\d+N?\Z")
_FLOAT = re.compile(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?M?\Z")
_RATIO = re.compile(r"[+-]?\d+/\d+\Z")
_CLOSERS = {"[": "]", "(": ")", "{": "}", "#{": "}"}
_WINDOW = 1 << 20


class _Tokens:
    """Yields (kind, text, line) from a text stream through a sliding window."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.line = 1

    def _fill(self) -> bool:
        if self.eof:
            return False
        chunk = self.stream.read(_WINDOW)
        if not chunk:
            self.eof = True
            return False
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        return True

    def next(self) -> tuple[str, str, int] | None:
        while True:
            if self.pos >= len(self.buf) and not self._fill():
                return None
            match = _TOKEN.match(self.buf, self.pos)
            # A token touching the window's end may continue in the next chunk.
            if (match is None or match.end() == len(self.buf)) and not self.eof:
                if self._fill():
                    continue
                match = _TOKEN.match(self.buf, self.pos)
            if match is None:
                bad = self.buf[self.pos : self.pos + 20]
                raise EdnError(f"EDN line {self.line}: cannot read {bad!r} (unterminated string or stray character)")
            kind, text, line = match.lastgroup, match.group(), self.line
            self.line += text.count("\n")
            self.pos = match.end()
            if kind != "ws":
                return kind, text, line


class _Parser:
    def __init__(self, stream: TextIO):
        self.tokens = _Tokens(stream)
        self.pending: tuple[str, str, int] | None = None

    def _next(self):
        if self.pending is not None:
            token, self.pending = self.pending, None
            return token
        return self.tokens.next()

    def form(self, closer: str | None = None) -> Any:
        """Reads one form; returns _END at `closer`, _EOF at end of input."""
        while True:
            token = self._next()
            if token is None:
                if closer is not None:
                    raise EdnError(f"EDN line {self.tokens.line}: input ends before the closing {closer!r}")
                return _EOF
            kind, text, line = token
            if kind == "discard":
                self._required(closer, line)
                continue
            if kind == "close":
                if text != closer:
                    raise EdnError(
                        f"EDN line {line}: unexpected {text!r}" + (f", expected {closer!r}" if closer else "")
                    )
                return _END
            return self._value(kind, text, line)

    def _required(self, closer, line):
        value = self.form(closer)
        if value is _END or value is _EOF:
            raise EdnError(f"EDN line {line}: a tag or #_ needs a form after it")
        return value

    def _value(self, kind: str, text: str, line: int) -> Any:
        if kind == "open":
            items = []
            while (item := self.form(_CLOSERS[text])) is not _END:
                items.append(item)
            if text == "[":
                return items
            if text == "(":
                return tuple(items)
            if text == "#{":
                return frozenset(_hashable(i) for i in items)
            if len(items) % 2:
                raise EdnError(f"EDN line {line}: a map needs an even number of forms")
            return {_hashable(items[i]): items[i + 1] for i in range(0, len(items), 2)}
        if kind == "string":
            return _unescape(text[1:-1], line)
        if kind == "tag":
            value = self._required(None, line)
            tag = text[1:]
            # Records (#jepsen.history.Op{...}) are read as the plain map.
            if isinstance(value, dict):
                return value
            return Tagged(tag, value)
        if kind == "symbolic":
            return {"##Inf": math.inf, "##-Inf": -math.inf, "##NaN": math.nan}.get(text) or _bad(line, text)
        if kind == "char":
            body = text[1:]
            if body in _CHARS:
                return _CHARS[body]
            if len(body) == 5 and body[0] == "u":
                return chr(int(body[1:], 16))
            return body
        return _atom(text, line)


def _bad(line: int, text: str):
    raise EdnError(f"EDN line {line}: cannot read {text!r}")


def _atom(text: str, line: int) -> Any:
    if text == "nil":
        return None
    if text == "true":
        return True
    if text == "false":
        return False
    if text[0] == ":":
        if len(text) == 1:
            _bad(line, text)
        return Keyword(text[1:])
    if _INT.match(text):
        return int(text.rstrip("N"))
    if _FLOAT.match(text):
        return Decimal(text[:-1]) if text.endswith("M") else float(text)
    if _RATIO.match(text):
        return Fraction(text)
    if text[0].isdigit() or (text[0] in "+-" and len(text) > 1 and text[1].isdigit()):
        _bad(line, text)
    return Symbol(text)


def _unescape(body: str, line: int) -> str:
    if "\\" not in body:
        return body
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _STRING_ESCAPES:
            out.append(_STRING_ESCAPES[nxt])
            i += 2
        elif nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", body[i + 2 : i + 6]):
            out.append(chr(int(body[i + 2 : i + 6], 16)))
            i += 6
        else:
            raise EdnError(f"EDN line {line}: unknown string escape \\{nxt}")
    return "".join(out)


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted(((_hashable(k), _hashable(v)) for k, v in value.items()), key=repr))
    return value


class _Marker:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


_END = _Marker("END")
_EOF = _Marker("EOF")


def iter_forms(stream: TextIO) -> Iterator[Any]:
    """Yields the top-level forms of a stream one at a time."""
    parser = _Parser(stream)
    while (value := parser.form()) is not _EOF:
        yield value


def loads(text: str) -> Any:
    """Reads exactly one form from a string."""
    forms = list(iter_forms(io.StringIO(text)))
    if len(forms) != 1:
        raise EdnError(f"expected one EDN form, found {len(forms)}")
    return forms[0]


def iter_history(path: str) -> Iterator[dict]:
    """Yields the op maps of a Jepsen history file.

    Accepts both shapes Jepsen writes: one map per top-level form, or a
    single vector/list of maps. The big vector is streamed element by element
    rather than materialized.
    """
    with open(path, encoding="utf-8") as stream:
        parser = _Parser(stream)
        first = parser._next()
        if first is None:
            return
        kind, text, _ = first
        if kind == "open" and text in ("[", "("):
            closer = _CLOSERS[text]
            while (item := parser.form(closer)) is not _END:
                yield item
            rest = parser.form()
            if rest is not _EOF:
                raise EdnError(f"EDN line {parser.tokens.line}: unexpected form after the history vector")
            return
        parser.pending = first
        while (value := parser.form()) is not _EOF:
            yield value


# ---------------------------------------------------------------- writer


def dumps(value: Any) -> str:
    """Writes a value as EDN (the inverse of the reader's mapping)."""
    out: list[str] = []
    _write(value, out)
    return "".join(out)


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("nil")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, (Keyword, Symbol)):
        out.append(str(value))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        if math.isnan(value):
            out.append("##NaN")
        elif math.isinf(value):
            out.append("##Inf" if value > 0 else "##-Inf")
        else:
            out.append(repr(value))
    elif isinstance(value, Decimal):
        out.append(f"{value}M")
    elif isinstance(value, Fraction):
        out.append(f"{value.numerator}/{value.denominator}")
    elif isinstance(value, str):
        out.append(_quote(value))
    elif isinstance(value, dict):
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            if i:
                out.append(", ")
            _write(k, out)
            out.append(" ")
            _write(v, out)
        out.append("}")
    elif isinstance(value, list):
        _seq(value, "[", "]", out)
    elif isinstance(value, tuple):
        _seq(value, "(", ")", out)
    elif isinstance(value, (set, frozenset)):
        _seq(sorted(value, key=repr), "#{", "}", out)
    elif isinstance(value, Tagged):
        out.append("#" + value.tag + " ")
        _write(value.value, out)
    else:
        raise TypeError(f"cannot write {type(value).__name__} as EDN")


def _seq(items, opener, closer, out):
    out.append(opener)
    for i, item in enumerate(items):
        if i:
            out.append(" ")
        _write(item, out)
    out.append(closer)


def _quote(text: str) -> str:
    escaped = (
        text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    )
    return '"' + escaped + '"'
