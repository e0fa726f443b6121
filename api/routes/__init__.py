"""One router per resource, mounted under /api/v1 by :func:`api.app.create_app`."""
