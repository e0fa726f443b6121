"""Alembic migrations of the control-plane database (PostgreSQL and SQLite).

Run them with ``spate db upgrade``; :mod:`spate.api.migrate` finds this folder
through the package, so no ``alembic.ini`` is needed.
"""
