"""Kafka's Java client (org.apache.kafka:kafka-clients) as a Gregor client library.

A client process that runs on the Java client starts one JVM (jvm.py) running
Gregor's driver (GregorKafkaDriver.java, compiled per client version by
build.py) and talks to it over its stdin/stdout. facade.py offers the part of
confluent-kafka's API the workloads use, with confluent-kafka's own types
(kafka_types.py subclasses them), so that workload code is the same on both
clients; error_table.py names the Java exceptions with librdkafka's error
names, which workloads/outcomes.py judges, and config_table.py maps
librdkafka's settings to Java's. workloads/kafka_client.py chooses between
the two libraries. docs/CLIENTS.md tables both mappings.
"""
