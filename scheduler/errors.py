"""The scheduler's exceptions: one base, a subclass per kind of failure."""

from __future__ import annotations


class SchedulerError(Exception):
    """Base of the scheduler's errors."""


class ConfigurationError(SchedulerError):
    """The scheduler's settings do not fit together; the message says what to change."""


class SubmitError(SchedulerError):
    """A cluster backend could not launch a job's process."""


class BackendCommandError(SchedulerError):
    """A command a cluster backend runs (kubectl, spark-submit) failed."""


class JobConfigurationError(SchedulerError):
    """What a job needs (its tables, their secrets) cannot be assembled; the job fails."""
