"""Each tenant's share of the deployment: its folders, its state store, its boundary.

- **Folders.** A tenant's *storage root* (``<tenant_storage>/<tenant id>``) is
  where its file connectors' paths resolve; its Spark checkpoints live under
  ``<checkpoint_root>/<tenant id>``; with the embedded state store its state
  is a SQLite file of its own (``<state folder>/<tenant id>/state.db``).
- **State store.** Jobs reach the state store with credentials that reach
  only their tenant: a file per tenant (SQLite); a role and schema per tenant
  (PostgreSQL: the role owns its schema, is given nothing else, and its
  password is derived from the deployment's secret); on FoundationDB the key
  prefix of the tenant, which the store layer applies to every key.
- **Boundary.** :meth:`Tenants.boundary` is what the planner and the tenant's
  jobs hold its connectors to: the storage root and the egress policy.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql

from spate.engine.connectors.core.boundary import Boundary
from spate.engine.connectors.core.egress import EgressPolicy
from spate.scheduler.config import SchedulerConfig
from spate.scheduler.errors import SchedulerError

log = logging.getLogger(__name__)

_ROLE_PREFIX = "spate_t_"


@dataclass(frozen=True)
class TenantSpace:
    """A tenant's folders on the scheduler's machine."""

    tenant_id: str
    #: where its tables' file paths resolve
    storage_root: Path
    #: the parent of its pipelines' Spark checkpoints
    checkpoint_dir: Path
    #: the folder of its embedded (SQLite) state store; None with a remote store
    state_dir: Path | None

    @property
    def folders(self) -> tuple[Path, ...]:
        """The folders its jobs may write."""
        found = [self.storage_root, self.checkpoint_dir]
        if self.state_dir is not None:
            found.append(self.state_dir)
        return tuple(found)


class Tenants:
    """Answers where a tenant's things are, for one scheduler deployment."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self._provisioned: set[str] = set()

    def space(self, tenant_id: str) -> TenantSpace:
        state_dir = None
        if self.config.state_url.startswith("sqlite:///"):
            state_dir = _sqlite_path(self.config.state_url).parent / "state" / tenant_id
        return TenantSpace(tenant_id=tenant_id,
                           storage_root=self.config.storage_root(tenant_id),
                           checkpoint_dir=self.config.tenant_checkpoint_dir(tenant_id),
                           state_dir=state_dir)

    def make_folders(self, tenant_id: str) -> None:
        """Create the tenant's folders, owner-only (a sandboxed job's unit does this as the
        tenant's user instead)."""
        for folder in self.space(tenant_id).folders:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)

    def boundary(self, tenant_id: str) -> Boundary:
        """What the tenant's tables may touch: its storage root and the egress policy."""
        return Boundary(storage_root=str(self.config.storage_root(tenant_id)),
                        egress=self.egress_policy())

    def egress_policy(self) -> EgressPolicy:
        """Where tenants' connections may go (the same for every tenant)."""
        return EgressPolicy.from_config(self.config.egress_allow, self.config.control_plane)

    def platform_endpoints(self) -> list[tuple[str, int]]:
        """The servers a tenant's unit must reach for Spate itself: a PostgreSQL state
        store (each tenant logs in with a role of its own; see :meth:`state_url`)."""
        url = urlsplit(self.config.state_url)
        if url.scheme in ("postgresql", "postgres") and url.hostname:
            return [(url.hostname, url.port or 5432)]
        return []

    def state_url(self, tenant_id: str) -> str:
        """The state store URL the tenant's jobs (and the scheduler, for them) use."""
        url = self.config.state_url
        if url.startswith("sqlite:///"):
            space = self.space(tenant_id)
            assert space.state_dir is not None
            return f"sqlite:///{space.state_dir / 'state.db'}"
        if url.startswith(("postgresql://", "postgres://")):
            role = role_name(tenant_id)
            if role not in self._provisioned:
                provision_postgres_role(url, role, self._password(tenant_id))
                self._provisioned.add(role)
            return tenant_postgres_url(url, role, self._password(tenant_id))
        return url  # fdb://: the tenant prefix every key carries is the boundary

    def _password(self, tenant_id: str) -> str:
        return hmac.new(self.config.state_role_secret, f"state-role/{tenant_id}".encode(),
                        hashlib.sha256).hexdigest()


def role_name(tenant_id: str) -> str:
    """The PostgreSQL role (and schema) of a tenant's state: a short, safe identifier."""
    digest = hashlib.sha256(tenant_id.encode()).hexdigest()[:20]
    return f"{_ROLE_PREFIX}{digest}"


def tenant_postgres_url(admin_url: str, role: str, password: str) -> str:
    """``admin_url`` as the tenant's role, its schema first on the search path."""
    parts = urlsplit(admin_url.replace("postgres://", "postgresql://", 1))
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{quote(role)}:{quote(password)}@{host}"
    if parts.port is not None:
        netloc += f":{parts.port}"
    query = urlencode({"options": f"-csearch_path={role}"})
    return urlunsplit(("postgresql", netloc, parts.path, query, ""))


def provision_postgres_role(admin_url: str, role: str, password: str) -> None:
    """Create (or refresh) the tenant's login role and the schema it owns, alone."""
    statements = [
        sql.SQL("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {}) THEN "
                "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT; "
                "END IF; END $$").format(sql.Literal(role), sql.Identifier(role)),
        sql.SQL("ALTER ROLE {} WITH LOGIN PASSWORD {}").format(sql.Identifier(role),
                                                               sql.Literal(password)),
        sql.SQL("CREATE SCHEMA IF NOT EXISTS {} AUTHORIZATION {}").format(
            sql.Identifier(role), sql.Identifier(role)),
        sql.SQL("REVOKE ALL ON SCHEMA {} FROM PUBLIC").format(sql.Identifier(role)),
    ]
    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as connection:
            # Concurrent first starts of two jobs of one tenant: one creates, one waits.
            connection.execute("SELECT pg_advisory_lock(hashtext(%s))", (role,))
            for statement in statements:
                connection.execute(statement)
    except psycopg.Error as error:
        raise SchedulerError(f"cannot prepare the tenant's state-store role: "
                             f"{str(error).strip().splitlines()[0]}") from None
    log.info("state-store role ready", extra={"role": role})


def _sqlite_path(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///"))
