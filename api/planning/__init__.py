"""Checking a tenant's SQL and UDFs for the API, in a bounded pool of processes."""
