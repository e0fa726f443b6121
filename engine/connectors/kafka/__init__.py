"""``kafka``: a Kafka topic as a source or a sink."""
