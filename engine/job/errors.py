"""Errors a job process reports as its one-line failure message."""

from __future__ import annotations


class JobError(Exception):
    """The job cannot run; the message is shown to the tenant and says what to change."""


class JobRefusedError(JobError):
    """The job was refused before any Spark work: bad SQL or an unusable setup."""
