"""The generator sources ``impulse`` and ``nexmark``, as native Spark."""
