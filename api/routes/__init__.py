"""One router per resource, mounted under /api/v1 by :func:`spate.api.app.create_app`."""
