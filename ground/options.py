"""Command-line options as data: each declared once, with its flag, help,
default and shape, so the parser gets it from the declaration and so does
whatever writes settings back as a command line (the catalogue's claims, a
run's record in test.json).

An option's shape is one of three: a VALUE (`--rate 200`), a SWITCH
(`--resend`, true or false) or a REPEAT (`--topic-config a=b`, given any
number of times). Settings written as data use the option's name (the flag
without --) as key: a value as it is, a switch as true or false, a repeat
as a list.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable, Iterable

from ground.errors import GregorError

VALUE, SWITCH, REPEAT = "value", "switch", "repeat"


@dataclass(frozen=True)
class Option:
    flag: str  # "--time-limit"
    help: str
    default: object = None  # a tuple reaches argparse as a list, as argparse's own defaults are
    kind: str = VALUE
    choices: tuple | None = None
    metavar: str | None = None
    type: Callable[[str], object] | None = None  # argparse's own check: a bad value is a usage error
    required: bool = False
    group: str | None = None  # the --help section listing it (None: the command's own options)

    @property
    def name(self) -> str:
        """The flag without --, as settings written as data name it."""
        return self.flag.removeprefix("--")

    @property
    def dest(self) -> str:
        """The attribute argparse stores it under."""
        return self.name.replace("-", "_")

    def add_to(self, parser) -> None:
        default = list(self.default) if isinstance(self.default, tuple) else self.default
        kwargs: dict = {"default": default, "help": self.help}
        if self.kind == SWITCH:
            kwargs["action"] = "store_true"
        elif self.kind == REPEAT:
            kwargs["action"] = "append"
        for key in ("choices", "metavar", "type"):
            if getattr(self, key) is not None:
                kwargs[key] = getattr(self, key)
        if self.required:
            kwargs["required"] = True
        parser.add_argument(self.flag, **kwargs)

    def words(self, value) -> list[str]:
        """The command-line words that give this option `value` (in its data form)."""
        if value is None or value is False:
            return []
        if self.kind == SWITCH:
            if value is not True:
                raise GregorError(f"{self.name} is a switch: true or false, not {value!r}")
            return [self.flag]
        if self.kind == REPEAT:
            return [word for item in (value if isinstance(value, list) else [value]) for word in (self.flag, str(item))]
        if value is True or isinstance(value, (list, dict)):
            raise GregorError(f"{self.name} takes one value, not {value!r}")
        return [self.flag, str(value)]


def add_options(parser: argparse.ArgumentParser, options: Iterable[Option]) -> None:
    """Every option onto the parser, in order; options of one group share its --help section."""
    groups: dict[str, object] = {}
    for option in options:
        target = parser
        if option.group:
            if option.group not in groups:
                groups[option.group] = parser.add_argument_group(option.group)
            target = groups[option.group]
        option.add_to(target)


def to_argv(options: Iterable[Option], settings: dict) -> list[str]:
    """{"acks": "1", "client-netns": True, "topic-config": ["a=b"]} -> --acks 1 --client-netns --topic-config a=b,
    each by its option's shape; a name no option has is refused in one line."""
    by_name = {option.name: option for option in options}
    argv: list[str] = []
    for name, value in settings.items():
        if name not in by_name:
            raise GregorError(f"unknown option --{name}")
        argv += by_name[name].words(value)
    return argv
