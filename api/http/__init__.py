"""The HTTP API: the application, its routes and bodies, request dependencies, errors
and middleware."""
