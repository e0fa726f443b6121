"""What the ``tf`` framework's plugin servicer lacks, added around it.

- **Write-only attributes** (Terraform 1.11): the framework's schema messages have
  no ``write_only`` field, so it is added to the encoded attribute as protocol
  field 11. Terraform then keeps such values out of plans and state: the
  provider sees them only in the configuration, which is kept here for the
  resource to read (:func:`configuration`), and answers them as null in every
  planned, applied and read state (the resources import them as null).
- **Checks when a create is planned**: the framework plans a create without
  asking the resource; a resource with ``check_create`` is asked here.
- **Replacement decided when planning**: the framework replaces a resource only for
  attributes its schema marks ``requires_replace``; a resource's ``plan`` may also
  call :func:`require_replace` (the pipeline does when its new SQL cannot keep its
  state), and Terraform then plans a replacement.
"""

from __future__ import annotations

import threading
from typing import Any

import grpc
from tf.gen import tfplugin_pb2 as pb
from tf.provider import ProviderServicer
from tf.schema import Attribute, Schema
from tf.utils import Diagnostics, read_dynamic_value, to_dynamic_value

#: protocol field ``Schema.Attribute.write_only`` (tfplugin6.7+), a varint ``true``
_WRITE_ONLY_FIELD = bytes([11 << 3 | 0, 1])

_local = threading.local()


class WriteOnly(Attribute):  # type: ignore[misc]
    """An attribute Terraform sends in the configuration but never stores."""

    write_only = True

    def to_pb(self) -> pb.Schema.Attribute:
        plain = super().to_pb()
        marked = pb.Schema.Attribute()
        marked.ParseFromString(plain.SerializeToString() + _WRITE_ONLY_FIELD)
        return marked


def write_only_names(schema: Schema) -> set[str]:
    return {a.name for a in schema.attributes if isinstance(a, WriteOnly)}


def configuration() -> dict[str, Any]:
    """The configuration of the resource being planned or applied on this thread."""
    return getattr(_local, "config", None) or {}


def require_replace(name: str) -> None:
    """From a resource's ``plan``: its change of attribute ``name`` replaces it."""
    _local.replace = [*(getattr(_local, "replace", None) or []), name]


def _nulled(value: pb.DynamicValue, names: set[str]) -> pb.DynamicValue:
    decoded = read_dynamic_value(value)
    if not isinstance(decoded, dict) or not names:
        return value
    return to_dynamic_value({k: (None if k in names else v) for k, v in decoded.items()})


class SpateServicer(ProviderServicer):  # type: ignore[misc]
    """The framework's servicer with write-only attributes."""

    def _write_only(self, type_name: str) -> set[str]:
        return write_only_names(self._get_res_cls(type_name).get_schema())

    def PlanResourceChange(self, request: pb.PlanResourceChange.Request,  # noqa: N802
                           context: grpc.ServicerContext) -> pb.PlanResourceChange.Response:
        _local.config = read_dynamic_value(request.config)
        _local.replace = []
        try:
            response = super().PlanResourceChange(request, context)
            self._check_create(request, response)
            if response.HasField("planned_state"):
                response.planned_state.CopyFrom(
                    _nulled(response.planned_state, self._write_only(request.type_name)))
            response.requires_replace.extend(
                pb.AttributePath(steps=[pb.AttributePath.Step(attribute_name=name)])
                for name in _local.replace)
            return response
        finally:
            _local.config = _local.replace = None

    def _check_create(self, request: pb.PlanResourceChange.Request,
                      response: pb.PlanResourceChange.Response) -> None:
        """The framework plans a create without the resource: let it check the
        proposed state (``check_create``) as its ``plan`` checks an update's."""
        klass = self._get_res_cls(request.type_name)
        proposed = read_dynamic_value(request.proposed_new_state)
        if (read_dynamic_value(request.prior_state) is not None or not proposed
                or not hasattr(klass, "check_create")):
            return
        diags = Diagnostics()
        self.app.new_resource(klass).check_create(diags, proposed)
        response.diagnostics.extend(diags.to_pb())

    def ApplyResourceChange(self, request: pb.ApplyResourceChange.Request,  # noqa: N802
                            context: grpc.ServicerContext) -> pb.ApplyResourceChange.Response:
        _local.config = read_dynamic_value(request.config)
        try:
            response = super().ApplyResourceChange(request, context)
            if response.HasField("new_state"):
                response.new_state.CopyFrom(
                    _nulled(response.new_state, self._write_only(request.type_name)))
            return response
        finally:
            _local.config = None

    def ReadResource(self, request: pb.ReadResource.Request,  # noqa: N802
                     context: grpc.ServicerContext) -> pb.ReadResource.Response:
        response = super().ReadResource(request, context)
        if response.HasField("new_state"):
            response.new_state.CopyFrom(
                _nulled(response.new_state, self._write_only(request.type_name)))
        return response
