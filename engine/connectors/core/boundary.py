"""A tenant's boundary as connectors see it: its storage root and its egress policy.

Every :class:`~spate.engine.connectors.core.base.TableConfig` carries the
:class:`Boundary` of the pipeline it belongs to. File connectors resolve
their paths through :meth:`Boundary.resolve_path`; network connectors check
their destinations with :attr:`Boundary.egress`. ``spate run`` (one trusted
user) plans with :data:`UNCONFINED`, which takes any path and any
destination; the service plans a tenant's SQL, and runs its jobs, with the
tenant's boundary. The sandbox a job runs in enforces the same boundary a
second time, from outside (``spate.scheduler.sandbox``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from spate.engine.connectors.core.egress import EgressPolicy
from spate.engine.connectors.core.errors import ConnectorError


class PathEscapeError(ConnectorError):
    """A path that would leave the tenant's storage root."""


@dataclass(frozen=True)
class Boundary:
    """What a pipeline's connectors may touch; None fields are unconfined."""

    #: Folder every file path is relative to; None: any path (``spate run``).
    storage_root: str | None = None
    #: Destinations network connectors may reach; None: any.
    egress: EgressPolicy | None = None

    @property
    def confined(self) -> bool:
        return self.storage_root is not None or self.egress is not None

    def resolve_path(self, raw: str, option: str = "path") -> str:
        """The absolute path ``raw`` names; inside the storage root when there is one.

        Under a root, ``raw`` is relative to it: absolute paths, ``..`` and
        paths whose symbolic links lead out of the root are refused.
        """
        if self.storage_root is None:
            return os.path.abspath(os.path.expanduser(raw))
        text = raw.strip()
        if text.startswith("file://"):
            text = text.removeprefix("file://")
        parts = PurePosixPath(text).parts
        if not text or text.startswith(("/", "~", "\\")) or ".." in parts or "\x00" in text:
            raise _escape(raw, option)
        root = os.path.realpath(self.storage_root)
        resolved = os.path.realpath(os.path.join(root, text))
        if os.path.commonpath([root, resolved]) != root or resolved == root:
            raise _escape(raw, option)
        return resolved

    def to_dict(self) -> dict[str, Any]:
        return {"storage_root": self.storage_root,
                "egress": None if self.egress is None else self.egress.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Boundary:
        if not data:
            return UNCONFINED
        egress = data.get("egress")
        return cls(storage_root=data.get("storage_root"),
                   egress=None if egress is None else EgressPolicy.from_dict(egress))


def _escape(raw: str, option: str) -> PathEscapeError:
    return PathEscapeError(
        f"path '{raw}' is outside your storage: give a path relative to your storage root "
        "(absolute paths, '..' and links that lead out of it are refused)", option=option)


#: No boundary: what ``spate run``, a single trusted user, plans with.
UNCONFINED = Boundary()
