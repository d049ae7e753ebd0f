"""The vocabulary of the loaded table (checkers/load.py): row kinds, outcome codes and routes.

Both loads (checkers/load.py by Spark SQL, checkers/fastload.py in Python
workers) write rows in these terms, and every finder reads them, down to
the per-key pass in a Python worker (checkers/keypass.py). So they live
here, below all of them, in a module that needs neither Spark nor numpy.
"""

from __future__ import annotations

# Row kinds of the loaded table.
SEND_ROW, POLL_ROW, COMMIT_ROW, REBALANCE_ROW, FROM_ROW, OP_ROW, PROBLEM_ROW = range(7)
KEY_KINDS = (SEND_ROW, POLL_ROW, COMMIT_ROW, REBALANCE_ROW, FROM_ROW)
# A key row's `tcode`: its op's outcome as a number.
OK_CODE, FAIL_CODE, INFO_CODE = 0, 1, 2

# Routes: a key for rows of one key, these for the rest.
NEMESIS_ROUTE = -1
PROBLEM_ROUTE = -(1 << 62)


def pid_route(pid):
    """Route of a client process's op rows, by its number (a row's `pid`; an
    int, a numpy array or a Column): negative, distinct from every key."""
    return -2 - pid
