"""Request and response bodies, one module per resource: ``<Entity>Create``,
``<Entity>Update`` and ``<Entity>Public``."""
