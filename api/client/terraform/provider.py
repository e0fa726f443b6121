"""The provider: its configuration (the API's URL and key) and what it offers."""

from __future__ import annotations

import os
import sys
from typing import Any

from tf.iface import Config, DataSource, Provider, Resource
from tf.schema import Attribute, Schema
from tf.types import String
from tf.utils import Diagnostics

from spate.api.client.sdk import DEFAULT_SERVER, ClientError, SpateClient

#: where Terraform finds the provider: ``source = "spate/spate"``
FULL_NAME = "registry.terraform.io/spate/spate"


class SpateProvider(Provider):  # type: ignore[misc]
    """Configured from ``api_url``/``api_key`` or ``SPATE_API_URL``/``SPATE_API_KEY``."""

    def __init__(self) -> None:
        self._client: SpateClient | None = None

    def get_model_prefix(self) -> str:
        return "spate_"

    def full_name(self) -> str:
        return FULL_NAME

    def get_provider_schema(self, diags: Diagnostics) -> Schema:
        return Schema(attributes=[
            Attribute("api_url", String(), optional=True,
                      description="the Spate server, e.g. http://127.0.0.1:8000 "
                                  "(default: SPATE_API_URL, then SPATE_SERVER)"),
            Attribute("api_key", String(), optional=True, sensitive=True,
                      description="an API key of the tenant (default: SPATE_API_KEY)"),
        ])

    def validate_config(self, diags: Diagnostics, config: Config) -> None:
        pass

    def configure_provider(self, diags: Diagnostics, config: Config) -> None:
        url = (_known(config.get("api_url")) or os.environ.get("SPATE_API_URL")
               or os.environ.get("SPATE_SERVER") or DEFAULT_SERVER)
        key = _known(config.get("api_key")) or os.environ.get("SPATE_API_KEY")
        if not key:
            diags.add_error("No Spate API key",
                            "Set api_key in the provider block or SPATE_API_KEY in the "
                            "environment to an API key of your tenant.", path=["api_key"])
            return
        try:
            self._client = SpateClient(url, key, key_named="api_key (or SPATE_API_KEY)")
        except ClientError as error:
            diags.add_error("Malformed Spate API key", error.message, path=["api_key"])

    @property
    def client(self) -> SpateClient:
        if self._client is None:
            raise RuntimeError("the provider is not configured")
        return self._client

    def get_data_sources(self) -> list[type[DataSource]]:
        from spate.api.client.terraform.datasources import ConnectorsData, PipelinesData
        return [ConnectorsData, PipelinesData]

    def get_resources(self) -> list[type[Resource]]:
        from spate.api.client.terraform.resources import (
            ApiKeyResource,
            ConnectionProfileResource,
            ConnectionTableResource,
            PipelineResource,
        )
        from spate.api.client.terraform.udfs import UdfResource
        return [PipelineResource, ConnectionProfileResource, ConnectionTableResource,
                ApiKeyResource, UdfResource]


def _known(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def main() -> None:
    """The ``terraform-provider-spate`` entry point: serve the provider to Terraform."""
    import tf.provider
    from tf.runner import run_provider

    from spate.api.client.terraform.servicer import SpateServicer

    # run_provider builds tf.provider.ProviderServicer; serve ours in its place.
    tf.provider.ProviderServicer = SpateServicer
    run_provider(SpateProvider(), sys.argv)
