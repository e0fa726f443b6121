"""A tenant's connection profiles and connection tables, secrets encrypted on the way in.

Plain options are stored as JSON; each secret option only as a Fernet token
(:mod:`spate.api.crypto`). Reads for responses never decrypt; decrypting happens
only for connectivity checks and when a job's tables are resolved. A generator
table (``impulse``, ``nexmark``) stored or changed is held to the tenant's plan
(``source_rate``): a job reading it resolves it again whenever it restarts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from spate.api.connections import (
    Options,
    OptionValue,
    build_table,
    check_connector,
    placeholders,
    split_options,
    table_definition,
)
from spate.api.crypto import SecretBox
from spate.api.http.errors import BadRequestError, ConflictError, NotFoundError
from spate.api.ids import new_id
from spate.api.models import ConnectionProfile, ConnectionTable, utc_now
from spate.api.planning.sql import PlannedSource
from spate.api.quotas import new_sources
from spate.api.repositories.base import TenantRepository, page, transaction
from spate.api.repositories.quotas import QuotaRepository
from spate.engine.connectors.core.boundary import UNCONFINED, Boundary
from spate.engine.planner.catalog import Table
from spate.engine.planner.external import TableDefinition

logger = logging.getLogger(__name__)


class ConnectionRepository(TenantRepository):
    """The connection profiles and tables of one tenant."""

    def __init__(self, session: Session, tenant_id: str, secret_box: SecretBox,
                 boundary: Boundary = UNCONFINED,
                 quotas: QuotaRepository | None = None) -> None:
        super().__init__(session, tenant_id)
        self.box = secret_box
        #: what the tenant's tables may touch: checked whenever a table is validated
        self.boundary = boundary
        #: admits the tables a write stores or changes (None: this repository only reads)
        self.quotas = quotas

    # Profiles

    def create_profile(self, name: str, connector: str, options: Options) -> ConnectionProfile:
        if self._find_profile(name) is not None:
            raise ConflictError(f"a connection profile named '{name}' already exists")
        now = utc_now()
        profile = ConnectionProfile(
            id=new_id(), name=name, connector=connector, config=options.plain,
            secrets=self.box.encrypt_all(options.secret), created_at=now, updated_at=now)
        with transaction(self.session, f"a connection profile named '{name}' was created "
                                       "concurrently"):
            self.session.add(profile)
        return profile

    def list_profiles(self, after: str | None,
                      limit: int) -> tuple[list[ConnectionProfile], str | None]:
        return page(self.session, select(ConnectionProfile), ConnectionProfile.id, after, limit)

    def get_profile(self, name: str) -> ConnectionProfile:
        profile = self._find_profile(name)
        if profile is None:
            raise NotFoundError(f"connection profile '{name}' not found")
        return profile

    def update_profile(self, name: str, config: Mapping[str, OptionValue | None],
                       secrets: Mapping[str, str | None]) -> ConnectionProfile:
        """Set (value) or remove (null) options; every table using the profile must still
        validate, or nothing changes."""
        profile = self.get_profile(name)
        given = split_options(profile.connector,
                              {k: v for k, v in config.items() if v is not None},
                              {k: v for k, v in secrets.items() if v is not None})
        touched = {k.lower() for k in (*config, *secrets)}
        plain = {k: v for k, v in profile.config.items() if k not in touched}
        tokens = {k: v for k, v in profile.secrets.items() if k not in touched}
        plain.update(given.plain)
        tokens.update(self.box.encrypt_all(given.secret))
        changed = []
        for table in self._tables_using(profile):
            options = {**plain, **placeholders(tokens), **self._own_options(table)}
            try:
                changed.append(self._table(table, options))
            except BadRequestError as error:
                raise BadRequestError(f"the change would break connection table "
                                      f"'{table.name}': {error.message}",
                                      details=error.details) from error
        self._admit(changed)
        with transaction(self.session, f"connection profile '{name}' changed concurrently"):
            profile.config, profile.secrets = plain, tokens
            profile.updated_at = utc_now()
        return profile

    def delete_profile(self, name: str) -> None:
        profile = self.get_profile(name)
        users = sorted(t.name for t in self._tables_using(profile))
        if users:
            raise ConflictError(f"connection profile '{name}' is used by connection tables "
                                f"{', '.join(users)}; delete them first",
                                details=[{"table": t} for t in users])
        with transaction(self.session, f"connection profile '{name}' is in use"):
            self.session.delete(profile)

    def reveal_profile(self, profile: ConnectionProfile) -> Options:
        """The profile's options with secrets decrypted (for a connectivity check)."""
        return Options(plain=dict(profile.config), secret=self.box.decrypt_all(profile.secrets))

    # Tables

    def create_table(self, name: str, connector: str, profile_name: str | None,
                     options: Options, fields: list[dict[str, Any]]) -> ConnectionTable:
        check_connector(connector)
        if self._find_table(name) is not None:
            raise ConflictError(f"a connection table named '{name}' already exists")
        profile = self._profile_for(connector, profile_name)
        now = utc_now()
        table = ConnectionTable(
            id=new_id(), name=name, connector=connector,
            profile_id=profile.id if profile else None, config=options.plain,
            secrets={}, fields=fields, created_at=now, updated_at=now)
        base = self._profile_options(profile)
        self._admit([self._table(table, {**base, **options.plain,
                                         **placeholders(options.secret)}, options.secret)])
        table.secrets = self.box.encrypt_all(options.secret)
        with transaction(self.session, f"a connection table named '{name}' was created "
                                       "concurrently, or its profile was deleted"):
            self.session.add(table)
        return table

    def unsaved_definition(self, name: str, connector: str, profile_name: str | None,
                           options: Options, fields: list[dict[str, Any]]
                           ) -> tuple[TableDefinition, Options]:
        """A table not stored (yet) as a check sees it: its definition and its options over
        its profile's, secrets decrypted. Nothing is written."""
        check_connector(connector)
        profile = self._profile_for(connector, profile_name)
        base = self.reveal_profile(profile) if profile is not None else Options()
        plain = {k: v for k, v in base.plain.items() if k not in options.secret}
        secret = {k: v for k, v in base.secret.items() if k not in options.plain}
        merged = Options(plain={**plain, **options.plain}, secret={**secret, **options.secret})
        return table_definition(name, connector, merged.merged(), fields), merged

    def list_tables(self, after: str | None,
                    limit: int) -> tuple[list[ConnectionTable], str | None]:
        return page(self.session, select(ConnectionTable), ConnectionTable.id, after, limit)

    def get_table(self, name: str) -> ConnectionTable:
        table = self._find_table(name)
        if table is None:
            raise NotFoundError(f"connection table '{name}' not found")
        return table

    def delete_table(self, name: str) -> None:
        table = self.get_table(name)
        with transaction(self.session, f"connection table '{name}' changed concurrently"):
            self.session.delete(table)

    def profile_names(self, tables: list[ConnectionTable]) -> dict[str, str]:
        """Profile id → name for the profiles ``tables`` use."""
        ids = {t.profile_id for t in tables if t.profile_id}
        if not ids:
            return {}
        rows = self.session.execute(select(ConnectionProfile.id, ConnectionProfile.name)
                                    .where(ConnectionProfile.id.in_(ids)))
        return {row.id: row.name for row in rows}

    def planned_table(self, table: ConnectionTable) -> Table:
        """The catalog entry of ``table`` with secrets as placeholders."""
        return self._table(table, self.options(table, reveal=False).merged())

    def catalog_definitions(self) -> list[TableDefinition]:
        """Every connection table as the planner sees it (secrets as placeholders); the
        planner leaves out, and logs, one that no longer validates."""
        tables = self.session.scalars(select(ConnectionTable).order_by(ConnectionTable.id))
        return [self.definition(t, reveal=False) for t in tables]

    def options(self, table: ConnectionTable, reveal: bool) -> Options:
        """The table's options over its profile's (the table's win); ``reveal`` decrypts
        the secrets, otherwise they are placeholders."""
        profile = (self.session.get(ConnectionProfile, table.profile_id)
                   if table.profile_id else None)
        if profile is None:
            base = Options()
        elif reveal:
            base = self.reveal_profile(profile)
        else:
            base = Options(dict(profile.config), placeholders(profile.secrets))
        own_secret = self.box.decrypt_all(table.secrets) if reveal else placeholders(
            table.secrets)
        plain = {k: v for k, v in base.plain.items() if k not in own_secret}
        secret = {k: v for k, v in base.secret.items() if k not in table.config}
        return Options(plain={**plain, **table.config}, secret={**secret, **own_secret})

    def definition(self, table: ConnectionTable, reveal: bool) -> TableDefinition:
        """The table's definition; ``reveal`` decrypts its secrets (for a job or a check)."""
        return table_definition(table.name, table.connector,
                                self.options(table, reveal).merged(), table.fields)

    def definitions(self) -> list[TableDefinition]:
        """Every connection table with secrets decrypted: what a starting job plans with."""
        tables = self.session.scalars(select(ConnectionTable).order_by(ConnectionTable.id))
        return [self.definition(t, reveal=True) for t in tables]

    # Helpers

    def _admit(self, tables: list[Table]) -> None:
        """Hold the generator tables a write stores or changes to the tenant's plan."""
        if self.quotas is None:
            raise RuntimeError("storing connection tables needs the tenant's quotas")
        self.quotas.admit(new_sources([PlannedSource.of(t) for t in tables
                                       if t.role == "source"]))

    def _table(self, table: ConnectionTable, options: Mapping[str, str],
               secret_values: Mapping[str, str] | None = None) -> Table:
        definition = table_definition(table.name, table.connector, options, table.fields)
        return build_table(definition, secret_values, self.boundary)

    @staticmethod
    def _own_options(table: ConnectionTable) -> dict[str, str]:
        return {**table.config, **placeholders(table.secrets)}

    @staticmethod
    def _profile_options(profile: ConnectionProfile | None) -> dict[str, str]:
        if profile is None:
            return {}
        return {**profile.config, **placeholders(profile.secrets)}

    def _profile_for(self, connector: str, name: str | None) -> ConnectionProfile | None:
        if name is None:
            return None
        profile = self._find_profile(name)
        if profile is None:
            raise BadRequestError(f"connection profile '{name}' not found; create it first",
                                  details=[{"field": "profile"}])
        if profile.connector != connector:
            raise BadRequestError(f"connection profile '{name}' is for connector "
                                  f"'{profile.connector}', not '{connector}'",
                                  details=[{"field": "profile"}])
        return profile

    def _tables_using(self, profile: ConnectionProfile) -> list[ConnectionTable]:
        return list(self.session.scalars(select(ConnectionTable).where(
            ConnectionTable.profile_id == profile.id).order_by(ConnectionTable.name)))

    def _find_profile(self, name: str) -> ConnectionProfile | None:
        return self.session.scalars(select(ConnectionProfile).where(
            ConnectionProfile.name == name)).one_or_none()

    def _find_table(self, name: str) -> ConnectionTable | None:
        return self.session.scalars(select(ConnectionTable).where(
            ConnectionTable.name == name)).one_or_none()


def job_tables(sessions: sessionmaker[Session], tenant_id: str,
               secret_box: SecretBox) -> list[dict[str, Any]]:
    """A tenant's connection tables with secrets decrypted, as JSON values for a job's spec.

    For the scheduler's store, whose own sessions span tenants: this opens a
    session of its own scoped to ``tenant_id``. Raises
    :class:`~spate.api.crypto.SecretKeyMismatchError` when the key cannot open a secret.
    """
    with sessions() as session:
        repository = ConnectionRepository(session, tenant_id, secret_box)
        return [definition.to_dict() for definition in repository.definitions()]
