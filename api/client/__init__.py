"""Spate's clients: the HTTP SDK the CLI uses, and the Terraform provider."""
