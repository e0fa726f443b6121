"""``nats``: NATS core subjects and JetStream streams."""
