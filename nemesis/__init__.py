"""Nemeses: faults as operations, recorded in the history and always healed."""
