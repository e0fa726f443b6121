"""The ``spate_udf`` resource: a Python UDF the tenant's pipelines call by name."""

from __future__ import annotations

from typing import Any

from tf.iface import (
    CreateContext,
    DeleteContext,
    ImportContext,
    PlanContext,
    ReadContext,
    State,
    UpdateContext,
)
from tf.schema import Attribute, Schema
from tf.types import Number, String, Unknown
from tf.utils import Diagnostics

from spate.api.client.terraform.common import ApiResource, api_errors, api_path, known

#: What a change of ``source`` leaves unknown until it is applied.
_FROM_SOURCE = ("version", "kind", "signature")


class UdfResource(ApiResource):
    """``spate_udf``: a UDF file stored under its name. A changed source becomes the
    UDF's next version (jobs started from then on load it); the file is checked when
    the change is planned, its problems shown at their line and column."""

    @classmethod
    def get_name(cls) -> str:
        return "udf"

    @classmethod
    def get_schema(cls) -> Schema:
        return Schema(attributes=[
            Attribute("name", String(), required=True, requires_replace=True,
                      description="the name pipelines call it by: the name of the one "
                                  "function the file declares, in lower case (its import id)"),
            Attribute("source", String(), required=True,
                      description="the Python file declaring the UDF (@udf, "
                                  "@vectorized_udf(...) or @udaf); a change is a new version"),
            Attribute("id", String(), computed=True),
            Attribute("version", Number(), computed=True, description="the current version"),
            Attribute("kind", String(), computed=True,
                      description="scalar, vectorized or aggregate"),
            Attribute("signature", String(), computed=True,
                      description="the function as the file declares it"),
        ])

    def plan(self, ctx: PlanContext, current: State | None, planned: State) -> State:
        if "source" in ctx.changed_fields:
            if known(planned.get("source")) and known(planned.get("name")):
                self._check(ctx.diagnostics, planned["name"], planned["source"])
            for field in _FROM_SOURCE:
                planned[field] = Unknown
        return planned

    def check_create(self, diags: Diagnostics, proposed: State) -> None:
        """A new UDF's file is checked when the create is planned, too."""
        if isinstance(proposed.get("name"), str) and isinstance(proposed.get("source"), str):
            self._check(diags, proposed["name"], proposed["source"])

    def _check(self, diags: Diagnostics, name: str, source: str) -> None:
        with api_errors(diags, ["source"]):
            answer = self.client.post("/udfs/validate", {"name": name, "source": source})
            for d in answer.get("diagnostics") or []:
                diags.add_error(f"Invalid UDF at line {d['line']}, column {d['column']}",
                                d["message"], path=["source"])

    def create(self, ctx: CreateContext, planned: State) -> State | None:
        name = planned["name"]
        with api_errors(ctx.diagnostics, ["source"]):
            if self.get_if_present(api_path("udfs", name)) is not None:
                ctx.diagnostics.add_error(
                    f"UDF '{name}' already exists",
                    f"Import it: terraform import <address> {name}", path=["name"])
                return None
            return self._state(self.client.post("/udfs", {"name": name,
                                                          "source": planned["source"]}))
        return None

    def read(self, ctx: ReadContext, current: State) -> State | None:
        with api_errors(ctx.diagnostics):
            udf = self.get_if_present(api_path("udfs", current["name"]))
            return None if udf is None else self._state(udf)
        return current

    def update(self, ctx: UpdateContext, current: State, planned: State) -> State | None:
        with api_errors(ctx.diagnostics, ["source"]):
            return self._state(self.client.post("/udfs", {"name": current["name"],
                                                          "source": planned["source"]}))
        return current

    def delete(self, ctx: DeleteContext, current: State) -> None:
        with api_errors(ctx.diagnostics):
            self.delete_if_present(api_path("udfs", current["name"]))

    def import_(self, ctx: ImportContext, id: str) -> State | None:
        with api_errors(ctx.diagnostics):
            return self._state(self.client.get(api_path("udfs", id)))
        return None

    @staticmethod
    def _state(udf: dict[str, Any]) -> State:
        return {"name": udf["name"], "source": udf["source"], "id": udf["id"],
                "version": udf["version"], "kind": udf["kind"], "signature": udf["signature"]}
