"""Workloads: seeded generators and real confluent-kafka clients that record a history."""
