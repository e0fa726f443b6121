"""Errors raised while a pipeline runs."""


class PipelineFailedError(Exception):
    """The pipeline stopped on an error; the message says what went wrong and where."""
