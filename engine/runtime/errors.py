"""Errors raised while a pipeline runs."""


class PipelineFailedError(Exception):
    """The pipeline stopped on an error; the message says what went wrong and where.
    ``transient``: the cause may pass by itself (the state store down or restarting,
    a full volume), so running again from the last committed epoch may succeed."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


#: How the failures that may pass by themselves read in a failed query's text: the
#: state store not answering, a volume out of space or over its quota.
TRANSIENT_MARKERS = ("StateStoreUnreachableError", "[Errno 28]", "[Errno 122]")


def is_transient_text(text: str) -> bool:
    """Whether a failure's text names a cause that may pass by itself."""
    return any(marker in text for marker in TRANSIENT_MARKERS)
