"""The PostgreSQL backend."""
