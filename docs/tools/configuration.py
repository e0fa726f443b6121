"""Generate ``docs/configuration.md``: every setting Spate reads, from the code that reads it.

    python docs/tools/configuration.py > docs/configuration.md

Three sources, all read from the code rather than copied:

- the server's settings model (:class:`spate.api.settings.Settings`): names,
  defaults, accepted values and descriptions;
- the few ``SPATE_*`` variables read outside that model (:data:`OTHER_VARIABLES`);
  :func:`variables_in_source` finds every ``SPATE_*`` name the packages
  mention, so a new variable cannot go undocumented;
- the options of ``spate run``, ``spate serve`` and ``spate worker`` (click).

``tests/docs/test_configuration.py`` fails when the committed page differs
from what this prints, or when a variable is read but not documented.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import annotated_types
import click
from pydantic import SecretStr
from pydantic.fields import FieldInfo

from spate.api.client.sdk import DEFAULT_SERVER
from spate.api.serve import serve
from spate.api.settings import CONFIG_FILE, Settings
from spate.api.worker import worker
from spate.engine.cli import run
from spate.statestore.cache import DEFAULT_CACHE_BYTES

ROOT = Path(__file__).resolve().parents[2]
#: Where the generated page lives, relative to the repository root.
DOCS_PATH = "docs/configuration.md"
#: The packages whose source is searched for ``SPATE_*`` names.
PACKAGES = ("api", "engine", "scheduler", "statestore")
PREFIX = "SPATE_"

#: Sections of the settings table: each starts at the named field and runs, in
#: declaration order, to the next section's first field.
SECTIONS = (
    ("database_url", "Control plane (API)"),
    ("quota_pipelines", "Tenants' plans (quotas)"),
    ("broker_url", "Scheduler and jobs"),
    ("sandbox", "The tenant boundary"),
    ("k8s_api_server", "Kubernetes backend"),
)

#: Meanings of settings whose field in api/settings.py carries no description.
#: A field with neither is an error: describe it there (preferably) or here.
MEANINGS = {
    "redis_key_prefix": "Prefix of every key Spate writes to Redis",
    "rate_limit_per_minute": "API requests a minute per tenant: the default plan's "
                             "api_requests_per_minute (SPATE_PLANS may give a plan another); "
                             "0 turns rate limits off for every plan",
    "rate_limit_burst": "API requests a tenant may make at once, before the per-minute "
                        "rate applies",
    "max_body_bytes": "Larger API request bodies are refused with 413",
}


@dataclass(frozen=True)
class Variable:
    """A ``SPATE_*`` environment variable read outside the settings model."""

    name: str
    default: str
    meaning: str
    read_by: str


OTHER_VARIABLES = (
    Variable("SPATE_LOG", "`WARNING` (`spate` commands), `INFO` (job processes)",
             "Log level: `DEBUG`, `INFO`, `WARNING` or `ERROR`; jobs started by the "
             "scheduler inherit it", "`api/cli/__init__.py`, `engine/job/main.py`"),
    Variable("SPATE_STATE_CACHE_BYTES", f"`{DEFAULT_CACHE_BYTES}`",
             "Bound of each process's state cache, in bytes", "`statestore/cache.py`"),
    Variable("SPATE_SERVER", f"`{DEFAULT_SERVER}`",
             "The server the client commands (`spate pipelines`, `spate keys`) talk to",
             "`api/cli/common.py`"),
    Variable("SPATE_API_KEY", "unset",
             "The API key the client commands send (safer than `--api-key`, which "
             "lands in shell history)", "`api/cli/common.py`, `api/client/terraform/provider.py`"),
    Variable("SPATE_API_URL", "`SPATE_SERVER`",
             "The server the Terraform provider talks to, when its `api_url` is not set",
             "`api/client/terraform/provider.py`"),
    Variable("SPATE_JVM_ARCHIVE", "`~/.cache/spate/jvm`",
             "Folder of the driver JVM's class archive (`python -m spate.engine.jvm_archive` "
             "makes it; drivers Spate starts map it), or `off`", "`engine/jvm_archive.py`"),
)

#: ``SPATE_*`` names in the source that are not settings, and why.
INTERNAL = {
    "SPATE_CGROUPS": "passed by the scheduler to the wrapper that starts a sandboxed job",
}

#: Meanings of command options that have no help text.
OPTION_MEANINGS = {
    ("run", "tenant"): "Tenant the pipeline's state is kept under in the state store",
    ("serve", "port"): "Port to listen on",
    ("worker", "loglevel"): "Log level of the Celery worker",
}

SPATE_TOML_EXAMPLE = """\
# spate.toml, read from the working directory (SPATE_* variables win over it)
database_url = "postgresql://spate@db.example.internal/spate"
broker_url = "redis://redis.example.internal:6379/0"
state_url = "postgresql://spate@state.example.internal/spate_state"
cluster_backend = "standalone"
spark_master = "spark://spark.example.internal:7077"
"""


def variables_in_source(root: Path = ROOT) -> set[str]:
    """Every ``SPATE_*`` name the packages' Python source mentions."""
    pattern = re.compile(r"\b" + PREFIX + r"[A-Z0-9_]*[A-Z0-9]")
    names: set[str] = set()
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            names.update(pattern.findall(path.read_text(encoding="utf-8")))
    return names


def setting_variables() -> set[str]:
    """The variable of each field of the settings model."""
    return {PREFIX + name.upper() for name in Settings.model_fields}


def undocumented_variables(root: Path = ROOT) -> set[str]:
    """Names the source mentions that this page documents nowhere."""
    documented = setting_variables() | {v.name for v in OTHER_VARIABLES} | set(INTERNAL)
    return variables_in_source(root) - documented


def _code(value: object) -> str:
    return f"`{value}`"


def _default(field: FieldInfo) -> str:
    value = field.default
    if value is None:
        return "unset"
    if value == "":
        return "empty"
    return _code(value)


def _bounds(metadata: Iterable[Any]) -> list[str]:
    parts = []
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            parts.append(f"≥ {item.ge}")
        elif isinstance(item, annotated_types.Gt):
            parts.append(f"> {item.gt}")
        elif isinstance(item, annotated_types.Le):
            parts.append(f"≤ {item.le}")
        elif isinstance(item, annotated_types.MinLen):
            parts.append("not empty" if item.min_length == 1
                         else f"at least {item.min_length} characters")
        elif isinstance(item, annotated_types.MaxLen):
            parts.append(f"at most {item.max_length} characters")
        elif getattr(item, "pattern", None):
            parts.append(f"matching `{item.pattern}`")
    return parts


def _accepted(field: FieldInfo) -> str:
    annotation = field.annotation
    if get_origin(annotation) is not Literal:
        kinds = [kind for kind in get_args(annotation) or (annotation,) if kind is not type(None)]
        annotation = kinds[0]
    if get_origin(annotation) is Literal:
        choices = [_code(choice) for choice in get_args(annotation)]
        return ", ".join(choices[:-1]) + " or " + choices[-1]
    kind = {str: "text", int: "integer", float: "number", Path: "path",
            SecretStr: "secret text (never shown)"}[annotation]
    return ", ".join([kind, *_bounds(field.metadata)])


def _meaning(name: str, field: FieldInfo) -> str:
    meaning = field.description or MEANINGS.get(name)
    if meaning is None:
        raise ValueError(f"setting {name!r} has no description: give its Field one in "
                         "api/settings.py (or add it to MEANINGS in docs/tools/configuration.py)")
    return _cell(meaning)


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell (``<data_dir>`` is no HTML tag)."""
    text = " ".join(text.split())
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _sections() -> Iterator[tuple[str, list[str]]]:
    names = list(Settings.model_fields)
    starts = []
    for first, title in SECTIONS:
        if first not in names:
            raise ValueError(f"section {title!r} starts at {first!r}, which is not a setting")
        starts.append((names.index(first), title))
    starts.sort()
    for index, (start, title) in enumerate(starts):
        end = starts[index + 1][0] if index + 1 < len(starts) else len(names)
        yield title, names[start:end]


def settings_tables() -> list[str]:
    lines: list[str] = []
    fields = Settings.model_fields
    for title, names in _sections():
        lines += [f"### {title}", "", "| variable | default | accepted | meaning |",
                  "|---|---|---|---|"]
        for name in names:
            field = fields[name]
            lines.append(f"| `{PREFIX}{name.upper()}` | {_default(field)} | "
                         f"{_accepted(field)} | {_meaning(name, field)} |")
        lines.append("")
    return lines


def other_variables_table() -> list[str]:
    lines = ["| variable | default | meaning | read by |", "|---|---|---|---|"]
    for variable in OTHER_VARIABLES:
        lines.append(f"| `{variable.name}` | {variable.default} | {variable.meaning} | "
                     f"{variable.read_by} |")
    return lines


def _option_default(option: click.Option) -> str:
    if option.is_flag and not option.secondary_opts:
        return "off"
    if option.default is None:
        return "—"
    if option.secondary_opts:
        return _code(option.opts[0] if option.default else option.secondary_opts[0])
    return _code(option.default)


def command_table(name: str, command: click.Command) -> list[str]:
    lines = [f"### `spate {name}`", "", "| option | default | meaning |", "|---|---|---|"]
    for param in command.params:
        if not isinstance(param, click.Option) or param.hidden:
            continue
        flags = " / ".join(f"`{flag}`" for flag in (*param.opts, *param.secondary_opts))
        help_text = param.help or OPTION_MEANINGS.get((name, str(param.name)))
        if help_text is None:
            raise ValueError(f"option {param.opts[0]} of spate {name} has no help text: give it "
                             "one (or add it to OPTION_MEANINGS in docs/tools/configuration.py)")
        help_text = _cell(help_text)
        lines.append(f"| {flags} | {_option_default(param)} | {help_text} |")
    lines.append("")
    return lines


def markdown() -> str:
    """The whole page."""
    lines = [
        "# Configuration",
        "",
        "<!-- Generated by `python docs/tools/configuration.py > docs/configuration.md`"
        " from api/settings.py, the commands' options and the variables the code reads."
        " Do not edit by hand: tests/docs/test_configuration.py fails when it is stale. -->",
        "",
        "Every setting has a default that gives the embedded mode: `spate run` and "
        "`spate serve` need none. A deployment sets a few (see "
        "[deployment.md](deployment.md)).",
        "",
        "## How the server reads its settings",
        "",
        f"The API, `spate serve` and `spate worker` read the settings below from `{PREFIX}*` "
        f"environment variables or from `{CONFIG_FILE}` in the working directory, where a "
        f"setting is written in lower case without the prefix (`{PREFIX}DATABASE_URL` is "
        "`database_url`). A variable wins over the file. Settings are checked when a process "
        "starts: an unknown key in the file, a value out of range or a placeholder secret "
        "stops it with a message naming the setting, never echoing a secret value.",
        "",
        "```toml",
        SPATE_TOML_EXAMPLE.rstrip(),
        "```",
        "",
        "## Server settings",
        "",
        *settings_tables(),
        "## Other environment variables",
        "",
        "Read directly by the process named, in every mode (they are not read from "
        f"`{CONFIG_FILE}`).",
        "",
        *other_variables_table(),
        "",
        "## Command options",
        "",
        "Options of the commands that run pipelines or servers; every command also has "
        "`--help`. The client commands are described in [cli.md](cli.md).",
        "",
        *command_table("run", run),
        *command_table("serve", serve),
        *command_table("worker", worker),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> int:
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
