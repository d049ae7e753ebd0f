"""Checkers: PySpark jobs from a history to the anomalies of docs/ANOMALIES.md."""
