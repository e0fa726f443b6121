"""The FoundationDB backend (official bindings, imported only when used)."""
