"""Escaping for HTML and SVG: every untrusted string goes through `esc`.

Record values, broker error text, topic and process names and nemesis
values come from outside; `esc` is html.escape with quote=True so they are
safe in text and in attribute values alike.
"""

from __future__ import annotations

import html
import json


def esc(value) -> str:
    """Any value as escaped text (None -> empty); dicts/lists as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        value = json.dumps(value, sort_keys=True)
    return html.escape(str(value), quote=True)


def fmt_num(value, digits: int = 1) -> str:
    """Numbers for people: thousands separators, few decimals; '?' for missing."""
    if value is None:
        return "?"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return esc(value)
