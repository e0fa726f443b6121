"""Errors raised while a pipeline runs."""


class PipelineFailedError(Exception):
    """The pipeline stopped on an error; the message says what went wrong and where.
    ``transient``: the cause was a dependency that did not answer (the state store
    down or restarting), so running again from the last committed epoch may succeed."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient
