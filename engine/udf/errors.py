"""Errors of Python UDFs: a file that does not define them properly, and a call that raised."""

from __future__ import annotations


class UdfError(Exception):
    """Base of every UDF error; the message says what to change."""


class UdfDefinitionError(UdfError):
    """The UDF file cannot be used; located at a 1-based line and column of it."""

    def __init__(self, message: str, filename: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.filename = filename
        self.line = line
        self.column = column

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.column}: {self.message}"


class UdfFailedError(UdfError):
    """A UDF raised, or returned a value its signature does not allow (on an executor).

    The first line names the UDF and the error; the next ones are the last
    frames of the traceback in the UDF file.
    """
