"""One exception type for every error a user must fix.

The CLI prints its message as a single line and exits 2, so the message
itself must say what is wrong and what to do about it.
"""


class GregorError(Exception):
    """A user-facing error: one line that says what to fix."""
