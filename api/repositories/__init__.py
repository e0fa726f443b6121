"""Data access: the only code that queries the control-plane database.

Every repository of tenant data derives from :class:`TenantRepository`, which
takes the tenant and scopes its session to it (see :mod:`spate.api.tenancy`), so
each query it runs is filtered by tenant. Routes get repositories from
:mod:`spate.api.http.deps` and never build queries themselves.
"""
