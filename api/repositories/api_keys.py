"""A tenant's API keys: issue, list, revoke, rotate."""

from __future__ import annotations

from sqlalchemy import func, select

from spate.api.http.errors import ConflictError, NotFoundError
from spate.api.models import ApiKey, utc_now
from spate.api.repositories.base import TenantRepository, page, transaction
from spate.api.security import IssuedKey, Role, issue_key


def new_key_row(tenant_id: str, name: str, role: Role) -> tuple[ApiKey, IssuedKey]:
    """A key row for ``tenant_id`` and its one-time token (not yet added to a session)."""
    issued = issue_key()
    row = ApiKey(id=issued.key_id, tenant_id=tenant_id, name=name, role=role.value,
                 secret_sha256=issued.secret_sha256, prefix=issued.display_prefix,
                 created_at=utc_now())
    return row, issued


class ApiKeyRepository(TenantRepository):
    """The API keys of one tenant."""

    def create(self, name: str, role: Role) -> tuple[ApiKey, IssuedKey]:
        row, issued = new_key_row(self.tenant_id, name, role)
        with transaction(self.session, "an API key with this id exists; retry"):
            self.session.add(row)
        return row, issued

    def list_keys(self, after: str | None, limit: int,
             include_revoked: bool) -> tuple[list[ApiKey], str | None]:
        statement = select(ApiKey)
        if not include_revoked:
            statement = statement.where(ApiKey.revoked_at.is_(None))
        return page(self.session, statement, ApiKey.id, after, limit)

    def get(self, key_id: str) -> ApiKey:
        row = self.session.scalars(select(ApiKey).where(ApiKey.id == key_id)).one_or_none()
        if row is None:
            raise NotFoundError(f"API key '{key_id}' not found")
        return row

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key at once; revoking a revoked key changes nothing."""
        row = self.get(key_id)
        if row.revoked_at is not None:
            return row
        if row.role == Role.ADMIN and self._active_admins() <= 1:
            raise ConflictError("this is the tenant's last active admin key; create another "
                                "admin key before revoking it")
        with transaction(self.session, "the key changed concurrently; retry"):
            row.revoked_at = utc_now()
        return row

    def rotate(self, key_id: str) -> tuple[ApiKey, IssuedKey]:
        """Give a key a new secret; the old secret stops working at once."""
        row = self.get(key_id)
        if row.revoked_at is not None:
            raise ConflictError(f"API key '{key_id}' is revoked; create a new key instead")
        issued = issue_key(row.id)
        with transaction(self.session, "the key changed concurrently; retry"):
            row.secret_sha256 = issued.secret_sha256
            row.prefix = issued.display_prefix
            row.rotated_at = utc_now()
        return row, issued

    def _active_admins(self) -> int:
        statement = select(func.count()).select_from(ApiKey).where(
            ApiKey.role == Role.ADMIN.value, ApiKey.revoked_at.is_(None))
        return int(self.session.scalar(statement) or 0)
