"""The built-in sinks: ``stdout``, ``blackhole`` and the implicit ``preview``."""
