"""The error and config tables of the Java client as Markdown, from the code itself.

docs/CLIENTS.md holds their output (tests/workloads/test_java_tables.py keeps
the two equal); print them with:

    python -m workloads.java_client.tables
"""

from __future__ import annotations

from workloads import outcomes
from workloads.java_client import config_table, error_table
from workloads.java_client.kafka_types import name_of

OUTCOME_TABLES = {
    "FENCING": outcomes.FENCING,
    "NOT_WRITTEN": outcomes.NOT_WRITTEN,
    "REJECTED_ATTEMPT": outcomes.REJECTED_ATTEMPT,
    "UNKNOWN": outcomes.UNKNOWN,
    "COMMIT_REJECTED": outcomes.COMMIT_REJECTED,
}


def outcome_table(name: str) -> str:
    """Where outcomes.py tables a name (`-`: nowhere, so it is judged as an unknown error)."""
    return ", ".join(table for table, names in OUTCOME_TABLES.items() if name in names) or "-"


def error_rows() -> str:
    head = "| Java exception | where | librdkafka name | outcomes.py | why |"
    lines = [head, "| --- | --- | --- | --- | --- |"]
    for row in (error_table.DESTROYED, error_table.STORED_TIMEOUT, *error_table.CLASS_ROWS):
        lines.append(f"| {row.java} | {row.where} | `{row.name}` | {outcome_table(row.name)} | {row.why} |")
    for code, java, why in error_table.CODE_ROWS:
        name = name_of(code)
        lines.append(f"| {java} | any | `{name}` (code {code}) | {outcome_table(name)} | {why} |")
    lines.append(
        "| any other, with a protocol code | any | librdkafka's name of the code | as that name | "
        "the same broker error |"
    )
    lines.append(
        "| any other, without | any | the Java class name | - | outcomes.py does not know it: `info` outside "
        "transaction bodies and polls |"
    )
    return "\n".join(lines)


def config_rows() -> str:
    lines = ["| librdkafka | Java | role | note |", "| --- | --- | --- | --- |"]
    for key, rule in config_table.RULES.items():
        java = f"`{rule.java}`" if rule.java else "(facade)"
        lines.append(f"| `{key}` | {java} | {'/'.join(rule.roles)} | {rule.why} |")
    for key, why in config_table.REFUSED.items():
        lines.append(f"| `{key}` | refused | | {why} |")
    lines.append("| anything else | refused | | one line: it has no counterpart in Kafka's Java client |")
    for role, defaults in config_table.DEFAULTS.items():
        for key, value in defaults.items():
            lines.append(f"| (unset) | `{key}={value}` | {role} | a Java default that differs from librdkafka's |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(error_rows())
    print()
    print(config_rows())
