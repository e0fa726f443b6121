"""/connectors: the connectors pipelines can declare tables with (the console's catalog)."""

from __future__ import annotations

from fastapi import APIRouter

from spate.api.http.deps import ViewerCaller
from spate.api.http.errors import ERROR_RESPONSES
from spate.api.http.schemas.connectors import ConnectorList, ConnectorOption, ConnectorPublic
from spate.engine.connectors import CONNECTORS
from spate.engine.connectors.core.metadata import OptionSpec

router = APIRouter(tags=["connections"], responses=ERROR_RESPONSES)

#: Created by the engine for bare SELECTs; SQL cannot declare it.
_IMPLICIT = frozenset({"preview"})


@router.get("/connectors", response_model=ConnectorList)
def list_connectors(caller: ViewerCaller) -> ConnectorList:
    """Every connector SQL may name, by name, with the roles its tables can take and the
    options it declares (the console builds its connection forms from them)."""
    del caller  # authenticated like every tenant route; the list is the same for all
    return ConnectorList(items=[
        ConnectorPublic(name=name, roles=sorted(connector.roles),
                        options=[_option(spec) for spec in connector.options])
        for name, connector in sorted(CONNECTORS.items()) if name not in _IMPLICIT])


def _option(spec: OptionSpec) -> ConnectorOption:
    value = None if spec.default_text or spec.default is None else spec.shown_default
    return ConnectorOption(
        name=spec.name, roles=sorted(spec.roles), secret=spec.secret, kind=spec.kind,
        required=spec.required, required_when=spec.required_when or None, default=value,
        default_text=spec.default_text or None, choices=list(spec.choices),
        description=spec.description)
