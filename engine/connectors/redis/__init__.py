"""``redis``: lookup tables, a stream source and sinks."""
