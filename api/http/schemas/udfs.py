"""Bodies of the UDFs resource: a UDF's source, its versions, and a check of a file."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from spate.api.http.schemas.common import StrictModel
from spate.api.http.schemas.pipelines import Diagnostic
from spate.api.models import NAME_LENGTH, Udf, UdfVersion

#: A UDF's name is the SQL name of the function its file declares: a Python name in
#: lower case (SQL calls it in any case).
UDF_NAME_PATTERN = rf"^[a-z_][a-z0-9_]{{0,{NAME_LENGTH - 1}}}$"
MAX_SOURCE_CHARS = 100_000

UdfName = Annotated[str, Field(
    pattern=UDF_NAME_PATTERN, max_length=NAME_LENGTH,
    description="the name SQL calls it by: the name of the one function its file declares, "
                "in lower case (letters, digits, '_')",
    examples=["ratio"],
)]
Source = Annotated[str, Field(
    min_length=1, max_length=MAX_SOURCE_CHARS,
    description="the Python file declaring the UDF with @udf, @vectorized_udf(...) or @udaf "
                "(from spate.engine.udf); read, never run, by the API",
)]


class UdfCreate(StrictModel):
    """A UDF's source: a new UDF, or a new version of one of that name."""

    name: UdfName
    source: Source


class UdfVersionSummary(BaseModel):
    """One version of a UDF, without its source."""

    model_config = ConfigDict(from_attributes=True)

    version: int
    kind: str = Field(description="scalar, vectorized or aggregate")
    signature: str = Field(description="the function as its file declares it, e.g. "
                                       "ratio(a: int, b: Optional[int]) -> Optional[float]")
    source_sha256: str
    created_at: datetime


class UdfVersionPublic(UdfVersionSummary):
    """One version of a UDF, with its source."""

    name: str
    source: str

    @classmethod
    def of(cls, udf: Udf, version: UdfVersion) -> UdfVersionPublic:
        return cls(name=udf.name, source=version.source,
                   **UdfVersionSummary.model_validate(version).model_dump())


class UdfPublic(BaseModel):
    """A UDF: its current version's source and signature, and every version."""

    id: str
    name: str
    version: int = Field(description="the current version")
    kind: str = Field(description="scalar, vectorized or aggregate")
    signature: str
    source: str
    source_sha256: str
    created_at: datetime
    updated_at: datetime
    versions: list[UdfVersionSummary] = Field(description="every version, oldest first")

    @classmethod
    def of(cls, udf: Udf) -> UdfPublic:
        current = udf.current
        return cls(id=udf.id, name=udf.name, version=udf.current_version, kind=current.kind,
                   signature=current.signature, source=current.source,
                   source_sha256=current.source_sha256, created_at=udf.created_at,
                   updated_at=udf.updated_at,
                   versions=[UdfVersionSummary.model_validate(v) for v in udf.versions])


class UdfValidation(BaseModel):
    """Whether a UDF file could be stored under a name: problems located in the file, or
    its kind and signature."""

    valid: bool
    diagnostics: list[Diagnostic]
    kind: str | None = None
    signature: str | None = None
