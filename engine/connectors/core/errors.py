"""The connectors' one exception base."""

from __future__ import annotations

from typing import Any


class ConnectorError(Exception):
    """A connector problem the user can fix; ``option`` names the WITH option at fault.

    ``at_key`` says the option's name is the problem (unknown or not accepted
    here), not its value, so the planner points at the key.
    """

    def __init__(self, message: str, option: str | None = None, at_key: bool = False) -> None:
        super().__init__(message)
        self.option = option
        self.at_key = at_key

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.option, self.at_key))
