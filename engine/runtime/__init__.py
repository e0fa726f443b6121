"""Runs a planned pipeline on Spark: epochs, watermarks, operators, sinks."""
