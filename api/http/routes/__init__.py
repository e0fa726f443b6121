"""One router per resource, mounted under /api/v1 by :func:`spate.api.http.app.create_app`."""
