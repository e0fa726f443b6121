"""The provider's resources: pipelines, connection profiles and tables, API keys."""

from __future__ import annotations

from typing import Any, ClassVar

from tf.iface import (
    Config,
    CreateContext,
    DeleteContext,
    ImportContext,
    PlanContext,
    ReadContext,
    State,
    UpdateContext,
)
from tf.schema import Attribute, Schema
from tf.types import Bool, List, Map, Number, String, Unknown
from tf.utils import Diagnostics

from spate.api.client.sdk import ClientError
from spate.api.client.terraform.common import (
    ApiResource,
    Object,
    absent,
    api_errors,
    api_path,
    known,
    report,
)
from spate.api.client.terraform.servicer import WriteOnly, configuration, require_replace

DEFAULT_TIMEOUT_S = 300
#: the roles of API keys (spate.api.security.Role; the provider imports no server code)
ROLES = ("admin", "developer", "billing", "viewer")
#: how the planner's message about a function it does not know begins
_UNKNOWN_FUNCTION = "unknown function '"


def _started(job: dict[str, Any]) -> bool:
    """Whether waiting for a pipeline's job to start is over: it runs, or it has ended
    (the API's ``active`` flag: the provider keeps no list of job states)."""
    return job["state"] == "running" or not job["active"]


# --------------------------------------------------------------------------- pipelines


class PipelineResource(ApiResource):
    """``spate_pipeline``: SQL, settings and whether it runs; create and update wait
    until its job runs (or fails, the job's message as the error)."""

    @classmethod
    def get_name(cls) -> str:
        return "pipeline"

    @classmethod
    def get_schema(cls) -> Schema:
        return Schema(attributes=[
            Attribute("name", String(), required=True, requires_replace=True,
                      description="the pipeline's name (its import id)"),
            Attribute("sql", String(), required=True,
                      description="the pipeline script; a change is a new version, and a "
                                  "running pipeline restarts on it with its state — or, "
                                  "when the new SQL cannot keep that state, the pipeline "
                                  "is replaced (deleted and created: no state)"),
            Attribute("description", String(), optional=True, computed=True),
            Attribute("parallelism", Number(), optional=True, computed=True,
                      description="tasks sharing the key groups (a change rescales)"),
            Attribute("checkpoint_interval_ms", Number(), optional=True,
                      description="time between epochs in ms; null: back to back"),
            Attribute("autoscale_min", Number(), optional=True,
                      description="with autoscale_max: the autoscaler chooses the "
                                  "parallelism in this range (leave parallelism unset)"),
            Attribute("autoscale_max", Number(), optional=True,
                      description="the highest parallelism the autoscaler may choose"),
            Attribute("stopped", Bool(), optional=True,
                      description="true: the pipeline is stopped (after a checkpoint); "
                                  "false or null: it runs"),
            Attribute("timeout_seconds", Number(), optional=True,
                      description=f"how long create and update wait for the job to run "
                                  f"or stop (default {DEFAULT_TIMEOUT_S})"),
            Attribute("id", String(), computed=True),
            Attribute("version", Number(), computed=True, description="the current SQL version"),
            Attribute("state", String(), computed=True,
                      description="the latest job's state (running, failed, stopped, ...)"),
            Attribute("job_id", String(), computed=True, description="the latest job's id"),
        ])

    def plan(self, ctx: PlanContext, current: State | None, planned: State) -> State:
        if "sql" in ctx.changed_fields and known(planned.get("sql")):
            self._check_sql(ctx.diagnostics, planned["sql"],
                            current["name"] if current else None)
        if ctx.changed_fields - {"timeout_seconds"}:
            planned["state"] = planned["job_id"] = Unknown
        if "sql" in ctx.changed_fields:
            planned["version"] = Unknown
        if "description" in ctx.changed_fields and planned.get("description") is None:
            planned["description"] = Unknown
        return planned

    def check_create(self, diags: Diagnostics, proposed: State) -> None:
        """A new pipeline's SQL is checked when the create is planned, too."""
        if isinstance(proposed.get("sql"), str):
            self._check_sql(diags, proposed["sql"])

    def _check_sql(self, diags: Diagnostics, sql: str, pipeline: str | None = None) -> None:
        """Diagnostics for invalid SQL; for new SQL of an existing ``pipeline``, a
        replacement instead of an update when the API says it cannot keep its state."""
        with api_errors(diags, ["sql"]):
            body = {"sql": sql, **({"pipeline": pipeline} if pipeline else {})}
            try:
                answer = self.client.post("/pipelines/validate", body)
            except ClientError as error:
                if pipeline is None or not absent(error):
                    raise
                answer = self.client.post("/pipelines/validate", {"sql": sql})
            for d in answer.get("diagnostics") or []:
                where = f"line {d['line']}, column {d['column']}"
                if str(d["message"]).startswith(_UNKNOWN_FUNCTION):
                    # maybe a spate_udf this apply creates first: the API checks again then
                    diags.add_warning(f"Unknown function at {where}",
                                      f"{d['message']}. Unless a spate_udf of this "
                                      "configuration creates it (make the pipeline depend "
                                      "on it), the apply fails.", path=["sql"])
                    continue
                diags.add_error(f"Invalid SQL at {where}", d["message"], path=["sql"])
            state = answer.get("state") or {}
            if state.get("verdict") == "incompatible":
                require_replace("sql")
                diags.add_warning(f"Pipeline '{pipeline}' is replaced, not updated",
                                  f"{state['message']}. It is deleted and created again, "
                                  "starting without state.", path=["sql"])

    def create(self, ctx: CreateContext, planned: State) -> State | None:
        name = planned["name"]
        body: dict[str, Any] = {"name": name, "sql": planned["sql"],
                                "stopped": bool(planned.get("stopped"))}
        for field in ("description", "parallelism", "checkpoint_interval_ms"):
            if known(planned.get(field)):
                body[field] = planned[field]
        if _autoscale(planned) is not None:
            body["autoscale"] = _autoscale(planned)
        with api_errors(ctx.diagnostics):
            try:
                pipeline = self.client.post("/pipelines", body)
            except ClientError as error:
                if error.status == 409:
                    ctx.diagnostics.add_error(
                        f"Pipeline '{name}' already exists",
                        f"{error.message}\nImport it: terraform import <address> {name}",
                        path=["name"])
                    return None
                raise
            state = self._state(pipeline, planned)
            if not planned.get("stopped"):
                state = self._state(self._wait_started(ctx.diagnostics, planned, None), planned)
            return state
        return None

    def read(self, ctx: ReadContext, current: State) -> State | None:
        with api_errors(ctx.diagnostics):
            pipeline = self.get_if_present(api_path("pipelines", current["name"]))
            return None if pipeline is None else self._state(pipeline, current)
        return current

    def update(self, ctx: UpdateContext, current: State, planned: State) -> State | None:
        name = current["name"]
        diags = ctx.diagnostics
        with api_errors(diags):
            before = self.client.get(api_path("pipelines", name))
            old_job = (before.get("job") or {}).get("id")
            run = not planned.get("stopped")
            replaced = False
            if planned["sql"] != before["sql"]:
                self.client.post(api_path("pipelines", name, "versions"), {"sql": planned["sql"]})
            settings = {f: planned[f] for f in ("description", "parallelism")
                        if known(planned.get(f)) and planned[f] != before[f]}
            if planned.get("checkpoint_interval_ms") != before["checkpoint_interval_ms"]:
                settings["checkpoint_interval_ms"] = planned.get("checkpoint_interval_ms")
            autoscale = _autoscale(planned)
            if autoscale != _range(before.get("autoscale")):
                settings["autoscale"] = autoscale
            was_running = before["desired_state"] == "running"
            if not run and was_running:
                settings["stop"] = "checkpoint"
            elif run and not was_running:
                settings["stop"] = "none"
                replaced = True
            if settings:
                self.client.patch(api_path("pipelines", name), settings)
                replaced = replaced or ("parallelism" in settings and was_running and run)
            if run and was_running and planned["sql"] != before["sql"]:
                self.client.post(api_path("pipelines", name, "restart"), {"with_state": True})
                replaced = True
            if run and replaced:
                return self._state(self._wait_started(diags, planned, old_job), planned)
            if not run and was_running:
                return self._state(self._wait_stopped(diags, planned), planned)
            return self._state(self.client.get(api_path("pipelines", name)), planned)
        return current

    def delete(self, ctx: DeleteContext, current: State) -> None:
        with api_errors(ctx.diagnostics):
            self.delete_if_present(api_path("pipelines", current["name"]), force="true")

    def import_(self, ctx: ImportContext, id: str) -> State | None:
        with api_errors(ctx.diagnostics):
            pipeline = self.client.get(api_path("pipelines", id))
            return self._state(pipeline, {"stopped": pipeline["desired_state"] == "stopped"
                                          or None})
        return None

    def _timeout(self, state: State) -> float:
        value = state.get("timeout_seconds")
        return float(value) if known(value) else float(DEFAULT_TIMEOUT_S)

    def _wait_started(self, diags: Diagnostics, planned: State,
                      old_job: str | None) -> dict[str, Any]:
        name = planned["name"]

        def settled(body: dict[str, Any]) -> bool:
            job = body.get("job") or {}
            return bool(job) and job["id"] != old_job and _started(job)

        body: dict[str, Any]
        body, ok = self.client.poll(api_path("pipelines", name), settled,
                                    self._timeout(planned))
        job = body.get("job") or {}
        if not ok:
            diags.add_error(
                f"Timed out waiting for pipeline '{name}' to run",
                f"After {self._timeout(planned):g} s its job is "
                f"{job.get('state', 'not started yet')}; the scheduler may still start it. "
                "Raise timeout_seconds, or see the pipeline's jobs.", path=["timeout_seconds"])
        elif job["state"] == "failed":
            diags.add_error(f"Pipeline '{name}' failed",
                            job.get("failure_message") or "its job failed without a message",
                            path=["sql"])
        return body

    def _wait_stopped(self, diags: Diagnostics, planned: State) -> dict[str, Any]:
        name = planned["name"]

        def settled(body: dict[str, Any]) -> bool:
            job = body.get("job")
            return not job or not job["active"]

        body: dict[str, Any]
        body, ok = self.client.poll(api_path("pipelines", name), settled,
                                    self._timeout(planned))
        if not ok:
            diags.add_error(f"Timed out waiting for pipeline '{name}' to stop",
                            f"After {self._timeout(planned):g} s its job is "
                            f"{body['job']['state']}.", path=["timeout_seconds"])
        return body

    @staticmethod
    def _state(pipeline: dict[str, Any], config: State) -> State:
        job = pipeline.get("job") or {}
        stopped = pipeline["desired_state"] == "stopped"
        return {
            "name": pipeline["name"],
            "sql": pipeline["sql"],
            "description": pipeline["description"],
            "parallelism": pipeline["parallelism"],
            "checkpoint_interval_ms": pipeline["checkpoint_interval_ms"],
            "autoscale_min": (pipeline.get("autoscale") or {}).get("min"),
            "autoscale_max": (pipeline.get("autoscale") or {}).get("max"),
            # null in the configuration means running: keep it null while it runs
            "stopped": stopped if (stopped or config.get("stopped") is not None) else None,
            "timeout_seconds": config.get("timeout_seconds"),
            "id": pipeline["id"],
            "version": pipeline["version"],
            "state": job.get("state", "stopped" if stopped else "created"),
            "job_id": job.get("id", ""),
        }


def _autoscale(state: State) -> dict[str, int] | None:
    """The autoscale range a configuration gives (None: off; both bounds or none)."""
    low, high = state.get("autoscale_min"), state.get("autoscale_max")
    if not known(low) or not known(high) or low is None or high is None:
        return None
    return {"min": int(low), "max": int(high)}


def _range(autoscale: dict[str, Any] | None) -> dict[str, int] | None:
    return None if not autoscale else {"min": autoscale["min"], "max": autoscale["max"]}


# ------------------------------------------------------------------------- connections


def _secrets_attributes() -> list[Attribute]:
    return [
        WriteOnly("secrets", Map(String()), optional=True, sensitive=True,
                  description="options kept encrypted by Spate; write-only: never in the "
                              "plan or the state. Sent on create and when secrets_version "
                              "changes"),
        Attribute("secrets_version", String(), optional=True,
                  description="change it to send secrets again (rotation)"),
        Attribute("secret_names", List(String()), computed=True,
                  description="the options Spate holds as secrets (names only)"),
    ]


def _configured_secrets(diags: Diagnostics) -> dict[str, str]:
    secrets = configuration().get("secrets")
    if secrets is Unknown:
        diags.add_error("secrets must be known when applying", path=["secrets"])
        return {}
    return dict(secrets or {})


class _Connection(ApiResource):
    """A connection profile or table: found at ``/<collection>/<name>``, its state built
    from the API's answer and what the configuration says of its secrets."""

    collection: ClassVar[str]

    def read(self, ctx: ReadContext, current: State) -> State | None:
        with api_errors(ctx.diagnostics):
            found = self.get_if_present(api_path(self.collection, current["name"]))
            return None if found is None else self._state(found, current)
        return current

    def delete(self, ctx: DeleteContext, current: State) -> None:
        with api_errors(ctx.diagnostics):
            self.delete_if_present(api_path(self.collection, current["name"]))

    def import_(self, ctx: ImportContext, id: str) -> State | None:
        with api_errors(ctx.diagnostics):
            return self._state(self.client.get(api_path(self.collection, id)), {})
        return None

    @staticmethod
    def _state(found: dict[str, Any], config: State) -> State:
        raise NotImplementedError


class ConnectionProfileResource(_Connection):
    """``spate_connection_profile``: a connector's shared settings and secrets."""

    collection = "connection-profiles"

    @classmethod
    def get_name(cls) -> str:
        return "connection_profile"

    @classmethod
    def get_schema(cls) -> Schema:
        return Schema(attributes=[
            Attribute("name", String(), required=True, requires_replace=True),
            Attribute("connector", String(), required=True, requires_replace=True),
            Attribute("config", Map(String()), optional=True,
                      description="options in clear (credentials belong in secrets)"),
            *_secrets_attributes(),
            Attribute("id", String(), computed=True),
        ])

    def plan(self, ctx: PlanContext, current: State | None, planned: State) -> State:
        if "secrets_version" in ctx.changed_fields:
            planned["secret_names"] = Unknown
        return planned

    def create(self, ctx: CreateContext, planned: State) -> State | None:
        with api_errors(ctx.diagnostics):
            body = {"name": planned["name"], "connector": planned["connector"],
                    "config": planned.get("config") or {},
                    "secrets": _configured_secrets(ctx.diagnostics)}
            return self._state(self.client.post(api_path(self.collection), body), planned)
        return None

    def update(self, ctx: UpdateContext, current: State, planned: State) -> State | None:
        with api_errors(ctx.diagnostics):
            old, new = current.get("config") or {}, planned.get("config") or {}
            body: dict[str, Any] = {}
            config = {k: v for k, v in new.items() if old.get(k) != v}
            config.update({k: None for k in old if k not in new})
            if config:
                body["config"] = config
            if planned.get("secrets_version") != current.get("secrets_version"):
                secrets: dict[str, Any] = dict(_configured_secrets(ctx.diagnostics))
                secrets.update({k: None for k in current.get("secret_names") or []
                                if k not in secrets})
                body["secrets"] = secrets
            path = api_path(self.collection, current["name"])
            profile = self.client.patch(path, body) if body else self.client.get(path)
            return self._state(profile, planned)
        return current

    @staticmethod
    def _state(profile: dict[str, Any], config: State) -> State:
        return {
            "name": profile["name"],
            "connector": profile["connector"],
            "config": profile["config"] or (None if config.get("config") is None else {}),
            "secrets": None,
            "secrets_version": config.get("secrets_version"),
            "secret_names": sorted(profile.get("secrets") or {}),
            "id": profile["id"],
        }


_FIELD = Object({"name": String(), "type": String(), "nullable": Bool()})


class ConnectionTableResource(_Connection):
    """``spate_connection_table``: a named table pipelines use without CREATE TABLE.
    The API has no update for tables: every change replaces it."""

    collection = "connection-tables"

    @classmethod
    def get_name(cls) -> str:
        return "connection_table"

    @classmethod
    def get_schema(cls) -> Schema:
        secrets = _secrets_attributes()
        secrets[1].requires_replace = True
        return Schema(attributes=[
            Attribute("name", String(), required=True, requires_replace=True),
            Attribute("connector", String(), required=True, requires_replace=True),
            Attribute("profile", String(), optional=True, requires_replace=True),
            Attribute("config", Map(String()), optional=True, requires_replace=True),
            *secrets,
            Attribute("fields", List(_FIELD), optional=True, requires_replace=True,
                      description="columns: name, SQL type, nullable"),
            Attribute("role", String(), computed=True, description="source or sink"),
            Attribute("id", String(), computed=True),
        ])

    def create(self, ctx: CreateContext, planned: State) -> State | None:
        with api_errors(ctx.diagnostics):
            body: dict[str, Any] = {
                "name": planned["name"], "connector": planned["connector"],
                "config": planned.get("config") or {},
                "secrets": _configured_secrets(ctx.diagnostics),
                "fields": [{k: v for k, v in f.items() if v is not None}
                           for f in planned.get("fields") or []]}
            if planned.get("profile"):
                body["profile"] = planned["profile"]
            return self._state(self.client.post(api_path(self.collection), body), planned)
        return None

    def update(self, ctx: UpdateContext, current: State, planned: State) -> State | None:
        # only attributes that never reach the API (every other change replaces)
        return {**current, "secrets_version": planned.get("secrets_version")}

    @staticmethod
    def _state(table: dict[str, Any], config: State) -> State:
        fields = [{"name": f["name"], "type": f["type"], "nullable": f["nullable"]}
                  for f in table["fields"]]
        own = {k: v for k, v in (config.get("config") or {}).items()}
        return {
            "name": table["name"],
            "connector": table["connector"],
            "profile": table["profile"],
            # the API shows the options a table was given; keep the configured spelling
            "config": own if own and all(table["config"].get(k) == v for k, v in own.items())
            else (table["config"] or (None if config.get("config") is None else {})),
            "secrets": None,
            "secrets_version": config.get("secrets_version"),
            "secret_names": sorted(table.get("secrets") or {}),
            "fields": fields or (None if config.get("fields") is None else []),
            "role": table["role"],
            "id": table["id"],
        }


# ----------------------------------------------------------------------------- API keys


class ApiKeyResource(ApiResource):
    """``spate_api_key``: a key of the tenant; the key itself is known once, on create,
    and kept in the state as a sensitive value (revoked on destroy)."""

    @classmethod
    def get_name(cls) -> str:
        return "api_key"

    @classmethod
    def get_schema(cls) -> Schema:
        return Schema(attributes=[
            Attribute("name", String(), required=True, requires_replace=True),
            Attribute("role", String(), required=True, requires_replace=True,
                      description="admin, developer, billing or viewer"),
            Attribute("id", String(), computed=True),
            Attribute("prefix", String(), computed=True),
            Attribute("key", String(), computed=True, sensitive=True,
                      description="the whole key, known only to the apply that created it "
                                  "(empty when imported)"),
        ])

    def validate(self, diags: Diagnostics, type_name: str, config: Config) -> None:
        super().validate(diags, type_name, config)
        role = config.get("role")
        if isinstance(role, str) and role not in ROLES:
            diags.add_error(f"Unknown role '{role}'",
                            f"role must be one of: {', '.join(ROLES)}", path=["role"])

    def create(self, ctx: CreateContext, planned: State) -> State | None:
        with api_errors(ctx.diagnostics):
            created = self.client.post("/api-keys", {"name": planned["name"],
                                                     "role": planned["role"]})
            return self._state(created, created["key"])
        return None

    def read(self, ctx: ReadContext, current: State) -> State | None:
        with api_errors(ctx.diagnostics):
            key = self.get_if_present(api_path("api-keys", current["id"]))
            if key is None or key.get("revoked_at"):
                return None
            return self._state(key, current.get("key"))
        return current

    def update(self, ctx: UpdateContext, current: State, planned: State) -> State | None:
        return current  # every configurable attribute replaces the key

    def delete(self, ctx: DeleteContext, current: State) -> None:
        with api_errors(ctx.diagnostics):
            self.delete_if_present(api_path("api-keys", current["id"]))

    def import_(self, ctx: ImportContext, id: str) -> State | None:
        with api_errors(ctx.diagnostics):
            for key in self.client.items("/api-keys"):
                if id in (key["name"], key["id"]):
                    return self._state(key, "")
            ctx.diagnostics.add_error(f"No active API key named '{id}'", path=["name"])
        return None

    @staticmethod
    def _state(key: dict[str, Any], secret: str | None) -> State:
        return {"name": key["name"], "role": key["role"], "id": key["id"],
                "prefix": key["prefix"], "key": secret or ""}


__all__ = ["ApiKeyResource", "ConnectionProfileResource", "ConnectionTableResource",
           "PipelineResource", "report"]
