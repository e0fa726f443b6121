"""``postgres``: lookup tables on PostgreSQL."""
