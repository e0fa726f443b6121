"""A Terraform provider for Spate, written on the ``tf`` framework (no Go toolchain).

Terraform starts it as ``terraform-provider-spate`` (``python -m spate.api.client.terraform``)
and talks to it over the plugin protocol; it talks to the Spate API through
:class:`spate.api.client.sdk.SpateClient`. Resources: ``spate_pipeline``,
``spate_connection_profile``, ``spate_connection_table``, ``spate_api_key`` and
``spate_udf``; data sources: ``spate_connectors`` and ``spate_pipelines``. docs/terraform.md
says how to install and use it.
"""
