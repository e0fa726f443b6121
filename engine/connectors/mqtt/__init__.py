"""``mqtt``: a source subscribed to a topic filter, and a sink publishing rows."""
