"""Gregor's controller: cluster backends, systems under test, the CLI."""
