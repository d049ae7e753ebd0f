"""The ground floor: what every other package stands on.

Errors, paths, atomic writes, /proc and signals, the seams between the
parts (protocols), and the table of faults. Nothing here imports from a
package above it (docs/ARCHITECTURE.md).
"""
