"""The wire relay: a Kafka-aware TCP relay that aims faults at single requests (docs/WIRE.md).

Standard library only, and its modules import only each other (relatively), so
the package can run with any python3 as `python3 -m harness.wire.relay`, on the
controller's host (client sources) or, shipped whole, on a node.
"""
