"""Spate's stateful operators: window aggregates whose state lives in statestore."""
