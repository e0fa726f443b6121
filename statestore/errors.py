"""Errors of the state store; every message tells the user what to do next."""


class StateStoreError(Exception):
    """Base of every state-store error."""


class UnknownStoreUrlError(StateStoreError):
    """The URL's scheme names no backend."""


class BackendUnavailableError(StateStoreError):
    """The backend cannot be reached, refused the credentials, or lacks its client library."""


class StateStoreUnreachableError(BackendUnavailableError):
    """The backend did not answer (down, restarting, a dropped connection): transient,
    unlike refused credentials or a missing database. A job retries after it."""


class EmbeddedStoreNotShareableError(StateStoreError):
    """The embedded (sqlite) store was used from another machine."""


class OutOfOrderEpochError(StateStoreError):
    """An epoch was begun or committed before the one preceding it."""


class EpochNotBegunError(StateStoreError):
    """A writer or commit named an epoch that was not begun, or was discarded."""


class IncompleteEpochError(StateStoreError):
    """An epoch was published before every manifest range committed its writer."""


class KeyGroupOutOfRangeError(StateStoreError):
    """A writer was given a key group outside the range it owns."""


class EpochUnavailableError(StateStoreError):
    """A read asked for an epoch that is not committed or was garbage-collected."""


class CorruptValueError(StateStoreError):
    """A stored value could not be decoded."""
