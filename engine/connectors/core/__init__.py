"""The connector contract and what every connector shares: option declarations, egress,
a tenant's boundary, dead letters, the push-source buffer, AWS settings."""
