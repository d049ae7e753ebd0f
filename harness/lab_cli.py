"""Subcommands of this package (filled in by the issue that builds it)."""


def register(subparsers) -> None:
    """Adds nothing yet."""
