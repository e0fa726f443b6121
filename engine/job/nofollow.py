"""Opening files in a folder a less trusted user can write, without following their links.

A sandboxed job's folder belongs to its tenant's unprivileged user, yet the
scheduler (as root) and the API write and read some files there: the spec,
``job.log``, the channel's ``events.jsonl`` and ``stop``. The tenant's job can
replace any of those names with a symbolic link to a server secret, a hard
link, or a FIFO that blocks whoever opens it. Every such file is opened here:
never through a link at its last component (``O_NOFOLLOW``), never blocking
on a FIFO, and only kept when the descriptor is a regular file with one link
(and the expected owner). The folder itself must be one the other user cannot
replace (its parent is not theirs), which holds for a job's folder under the
server's ``jobs`` folder.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Collection
from pathlib import Path

_ALWAYS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnsafeFileError(OSError):
    """A name in a job's folder is not the regular file it should be (a link, a FIFO,
    a file of someone else)."""


def open_regular(path: Path | str, flags: int, mode: int = 0o600,
                 owners: Collection[int] | None = None) -> int:
    """A descriptor of the regular file at ``path``, opened with ``flags`` without
    following a link; raises :class:`UnsafeFileError` (an ``OSError``) when it is not
    a regular file with one link owned by one of ``owners`` (None: anyone).

    ``O_TRUNC`` is refused: a file is only changed once it is known to be the right one.
    """
    if flags & os.O_TRUNC:
        raise ValueError("open_regular does not truncate; use os.ftruncate once checked")
    try:
        descriptor = os.open(path, flags | _ALWAYS, mode)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENXIO):  # a link, or a FIFO nobody reads
            raise UnsafeFileError(error.errno, f"{path} is not a regular file") from None
        raise
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise UnsafeFileError(errno.EPERM, f"{path} is not a regular file with one link")
        if owners is not None and info.st_uid not in owners:
            raise UnsafeFileError(errno.EPERM, f"{path} belongs to another user")
        _blocking(descriptor)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def create_new(path: Path | str, mode: int = 0o600, owner: int | None = None) -> int:
    """A descriptor (write-only) of a new, empty file at ``path``, given to ``owner``
    (user and group; None: this process's).

    Whatever had that name (a link included) is removed, never followed; if
    something takes the name again before the file is created, this fails
    (``FileExistsError``) rather than write through it.
    """
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _ALWAYS, mode)
    try:
        if owner is not None:
            os.fchown(descriptor, owner, owner)
        _blocking(descriptor)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _blocking(descriptor: int) -> None:
    """Clear ``O_NONBLOCK``: it was only there so that opening a FIFO could not hang."""
    flags = fcntl.fcntl(descriptor, fcntl.F_GETFL)
    fcntl.fcntl(descriptor, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
