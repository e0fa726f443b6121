"""Property-based requests from the OpenAPI document (schemathesis): never a 500.

Each operation gets a small number of generated requests, valid and invalid,
sent with a tenant admin key (the platform key for /tenants). Responses must
not be server errors and must match the documented status codes, content
types and schemas — which include the one error shape.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.schemas import APIOperation
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api.support import TenantKeys, TestClient, new_tenant, platform_auth

MAX_EXAMPLES = 12


@pytest.fixture(scope="module")
def fuzzed_app(make_app: Callable[..., FastAPI]) -> Iterator[tuple[FastAPI, TenantKeys]]:
    app = make_app("postgresql")
    with TestClient(app) as client:
        yield app, new_tenant(client)


@pytest.fixture(scope="module")
def api_schema(fuzzed_app: tuple[FastAPI, TenantKeys]) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_asgi("/api/v1/openapi.json", fuzzed_app[0])


def test_no_server_errors(api_schema: schemathesis.BaseSchema,
                          fuzzed_app: tuple[FastAPI, TenantKeys]) -> None:
    """Every operation, valid and invalid requests.  Driven with hypothesis directly
    (not schemathesis' pytest plugin, which reaches into pytest's internals)."""
    tenant = fuzzed_app[1]
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) > 20, "the OpenAPI document lost its operations"
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            _fuzz(operation, mode, tenant)


def _fuzz(operation: APIOperation, mode: GenerationMode, tenant: TenantKeys) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    def check(case: schemathesis.Case) -> None:
        headers = platform_auth() if case.path.startswith("/api/v1/tenants") else tenant.auth()
        case.call_and_validate(headers=headers, checks=[
            not_a_server_error, status_code_conformance, content_type_conformance,
            response_schema_conformance,
        ])

    check()
