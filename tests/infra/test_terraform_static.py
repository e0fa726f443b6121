"""The Terraform under infra/, checked without a cloud: formatting, a static
check of every module's references, variables, outputs and module calls, and
``terraform validate`` where a provider mirror is configured.

Providers cannot be downloaded here, so ``terraform validate`` runs only for
the roots whose providers all sit in the filesystem mirror named by
``SPATE_TF_PROVIDER_MIRROR`` (laid out as ``HOSTNAME/NAMESPACE/TYPE/VERSION/OS_ARCH``);
the others are skipped, naming the providers missing.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hcl2
import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
MIRROR_VARIABLE = "SPATE_TF_PROVIDER_MIRROR"

#: Arguments of a module block that are Terraform's, not the module's variables.
MODULE_META = {"source", "version", "count", "for_each", "providers", "depends_on"}
#: Attributes whose text is prose, where "var.x" is no reference.
PROSE = {"description", "error_message"}

_VAR = re.compile(r"(?<![\w.])var\.([A-Za-z_][\w-]*)")
_LOCAL = re.compile(r"(?<![\w.])local\.([A-Za-z_][\w-]*)")
_MODULE = re.compile(r"(?<![\w.])module\.([A-Za-z_][\w-]*)(?:\[[^\]]*\])?(?:\.([A-Za-z_][\w-]*))?")
_RESOURCE = re.compile(r"(?<![\w.])(data\.)?([a-z][a-z0-9]*_[a-z0-9_]+)\.([A-Za-z_][\w-]*)")


def unquote(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text


@dataclass
class Module:
    """What one folder of .tf files declares and what it refers to."""

    path: Path
    variables: dict[str, dict[str, Any]] = field(default_factory=dict)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    locals: set[str] = field(default_factory=set)
    resources: set[str] = field(default_factory=set)
    data: set[str] = field(default_factory=set)
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    providers: dict[str, str] = field(default_factory=dict)
    #: (file name, expression text) of every expression in the module
    expressions: list[tuple[str, str]] = field(default_factory=list)


def _strings(value: Any, key: str | None = None) -> list[str]:
    """Every string in a parsed block, prose attributes left out."""
    if key in PROSE:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for name, item in value.items() for text in _strings(item, name)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item, key)]
    return []


def _blocks(parsed: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [block for block in parsed.get(kind, []) if isinstance(block, dict)]


@functools.cache
def _parse(text: str) -> dict[str, Any]:
    """One .tf file's text, parsed (cached: the broken copies share most files)."""
    parsed: dict[str, Any] = hcl2.loads(text)
    return parsed


def load_module(folder: Path) -> Module:
    """Parse every .tf file of ``folder`` (python-hcl2 fails on a syntax error)."""
    module = Module(folder)
    files = sorted(folder.glob("*.tf"))
    assert files, f"{folder} holds no .tf file"
    for path in files:
        parsed = _parse(path.read_text())
        for block in _blocks(parsed, "variable"):
            module.variables.update({unquote(name): body for name, body in block.items()})
        for block in _blocks(parsed, "output"):
            module.outputs.update({unquote(name): body for name, body in block.items()})
        for block in _blocks(parsed, "locals"):
            module.locals.update(name for name in block if not name.startswith("__"))
        for kind, into in (("resource", module.resources), ("data", module.data)):
            for block in _blocks(parsed, kind):
                for rtype, named in block.items():
                    into.update(f"{unquote(rtype)}.{unquote(name)}" for name in named
                                if not name.startswith("__"))
        for block in _blocks(parsed, "module"):
            module.calls.update({unquote(name): body for name, body in block.items()})
        for block in _blocks(parsed, "terraform"):
            for required in block.get("required_providers", []):
                module.providers.update({name: unquote(spec["source"])
                                         for name, spec in required.items()
                                         if isinstance(spec, dict)})
        module.expressions += [(path.name, text) for text in _strings(parsed)]
    return module


def module_problems(module: Module, load: Any = load_module) -> list[str]:
    """What is wrong with ``module``'s references, variables, outputs and module calls."""
    problems: list[str] = []
    where = module.path.name
    used_vars: set[str] = set()
    sensitive = {name for name, body in module.variables.items() if body.get("sensitive") is True}
    prefixes = tuple(f"{name}_" for name in module.providers)
    children: dict[str, Module] = {}

    for name, body in module.calls.items():
        source = unquote(str(body.get("source", "")))
        if not source.startswith(("./", "../")):
            problems.append(f"{where}: module {name}: source {source!r} is not a local folder")
            continue
        folder = (module.path / source).resolve()
        if not folder.is_dir() or not list(folder.glob("*.tf")):
            problems.append(f"{where}: module {name}: source {source!r} is no module folder")
            continue
        child = children[name] = load(folder)
        passed = {key for key in body if key not in MODULE_META and not key.startswith("__")}
        for unknown in sorted(passed - set(child.variables)):
            problems.append(f"{where}: module {name}: unknown argument {unknown!r} "
                            f"({source} declares no such variable)")
        required = {var for var, spec in child.variables.items() if "default" not in spec}
        for missing in sorted(required - passed):
            problems.append(f"{where}: module {name}: required variable {missing!r} not passed")

    for file, text in module.expressions:
        for var in _VAR.findall(text):
            used_vars.add(var)
            if var not in module.variables:
                problems.append(f"{where}/{file}: var.{var} is not declared")
        for local in _LOCAL.findall(text):
            if local not in module.locals:
                problems.append(f"{where}/{file}: local.{local} is not defined")
        for call, output in _MODULE.findall(text):
            if call not in module.calls:
                problems.append(f"{where}/{file}: module.{call} is not declared")
            elif output and call in children and output not in children[call].outputs:
                problems.append(f"{where}/{file}: module.{call}.{output}: module {call} "
                                f"has no output {output!r}")
        for is_data, rtype, name in _RESOURCE.findall(text):
            if not rtype.startswith(prefixes):
                continue  # not a resource type of this module's providers
            declared = module.data if is_data else module.resources
            if f"{rtype}.{name}" not in declared:
                kind = "data source" if is_data else "resource"
                problems.append(f"{where}/{file}: {is_data}{rtype}.{name}: no such {kind}")

    for name, body in module.variables.items():
        if name not in used_vars:
            problems.append(f"{where}: variable {name!r} is declared but never used")
        for needed in ("type", "description"):
            if needed not in body:
                problems.append(f"{where}: variable {name!r} has no {needed}")
    for name, body in module.outputs.items():
        if "description" not in body or "value" not in body:
            problems.append(f"{where}: output {name!r} needs a description and a value")
        secret = sensitive & set(_VAR.findall(str(body.get("value", ""))))
        if secret and body.get("sensitive") is not True:
            problems.append(f"{where}: output {name!r} shows sensitive var.{min(secret)} "
                            "without sensitive = true")
    if not module.providers:
        problems.append(f"{where}: no required_providers (pin the providers in versions.tf)")
    for provider, source in module.providers.items():
        if not re.fullmatch(r"[a-z0-9-]+/[a-z0-9-]+", source):
            problems.append(f"{where}: provider {provider} has source {source!r}")
    return problems


def tree_problems(infra: Path) -> list[str]:
    problems: list[str] = []
    for folder in sorted({path.parent for path in infra.rglob("*.tf")}):
        if ".terraform" in folder.parts:
            continue
        problems += [f"{folder.relative_to(infra)}: {problem}"
                     for problem in module_problems(load_module(folder))]
    return problems


def roots(infra: Path) -> list[Path]:
    """Every module and example folder: what `terraform validate` can check."""
    return sorted([*(infra / "modules").iterdir(), *(infra / "examples").iterdir()])


# -- the checks -----------------------------------------------------------------------


def test_layout_every_module_has_its_files_and_a_readme() -> None:
    assert (INFRA / "README.md").is_file()
    assert (INFRA / "image" / "Dockerfile").is_file()
    modules = sorted(path.name for path in (INFRA / "modules").iterdir())
    assert modules == ["aws", "foundationdb", "kubernetes"]
    for name in modules:
        folder = INFRA / "modules" / name
        for file in ("main.tf", "variables.tf", "outputs.tf", "versions.tf", "README.md"):
            assert (folder / file).is_file(), f"modules/{name}/{file} is missing"
    examples = list((INFRA / "examples").iterdir())
    assert examples and all((example / "README.md").is_file() for example in examples)


def test_readmes_link_only_inside_the_repository() -> None:
    pages = sorted(INFRA.rglob("README.md"))
    assert len(pages) >= 5
    for page in pages:
        prose = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            assert not re.match(r"^[a-z][a-z0-9+.-]*:", target), f"{page}: {target}"
            path = target.split("#")[0]
            assert not path or (page.parent / path).exists(), f"{page}: {target}"


def test_every_tf_file_parses_and_every_reference_resolves() -> None:
    assert tree_problems(INFRA) == []


def test_module_variables_are_validated_and_secrets_sensitive() -> None:
    kubernetes = load_module(INFRA / "modules" / "kubernetes")
    aws = load_module(INFRA / "modules" / "aws")
    for module, secrets in ((kubernetes, ("database_url", "broker_url", "state_url",
                                          "platform_admin_key", "secret_key")),
                            (aws, ("db_password", "redis_auth_token"))):
        for name in secrets:
            assert module.variables[name].get("sensitive") is True, name
            assert module.variables[name].get("validation"), name
    # Most variables carry a validation block; free-form maps and sizes need none.
    for module in (kubernetes, aws):
        validated = [name for name, body in module.variables.items() if body.get("validation")]
        assert len(validated) >= len(module.variables) * 2 // 3, module.path.name


def test_deployments_use_real_setting_names() -> None:
    """Every SPATE_* name the Kubernetes module sets is a setting Spate reads."""
    from spate.api.settings import Settings

    known = {f"SPATE_{name.upper()}" for name in Settings.model_fields} | {"SPATE_LOG"}
    text = (INFRA / "modules" / "kubernetes" / "main.tf").read_text()
    names = set(re.findall(r"\b(SPATE_[A-Z0-9_]+)\s*=", text))
    assert names, "no SPATE_* settings found"
    assert names <= known, sorted(names - known)


def _resource(module: str, rtype: str, name: str) -> dict[str, Any]:
    for path in sorted((INFRA / "modules" / module).glob("*.tf")):
        for block in _blocks(_parse(path.read_text()), "resource"):
            body = block.get(f'"{rtype}"', {}).get(f'"{name}"')
            if body is not None:
                found: dict[str, Any] = body
                return found
    raise AssertionError(f"modules/{module} has no {rtype}.{name}")


def _rights(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(API group, resource, verb) of every rule, from HCL (quoted) or from a manifest."""
    return {(unquote(group), unquote(resource), unquote(verb)) for rule in rules
            for group in rule["api_groups" if "api_groups" in rule else "apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}


def test_the_workers_role_covers_what_the_kubernetes_backend_does() -> None:
    """The ClusterRole lets the worker `kubectl apply` every object of a tenant's namespace
    (get, create, patch), grant the tenant's Role (holding its rights), and watch and
    remove driver pods and spec Secrets, as scheduler/backends/kubernetes.py does."""
    from spate.scheduler.backends.k8s_tenancy import tenant_manifests
    from spate.scheduler.config import KubernetesConfig

    held = _rights(_resource("kubernetes", "kubernetes_cluster_role_v1", "worker")["rule"])
    manifests = tenant_manifests(KubernetesConfig(), "spate-t-acme", "acme", ("10.0.0.0/8",))
    kinds = {(item["apiVersion"], item["kind"]) for item in manifests} | {("v1", "Secret")}
    needed: set[tuple[str, str, str]] = set()
    for api_version, kind in kinds:
        group = api_version.rpartition("/")[0]
        plural = kind.lower()[:-1] + "ies" if kind.endswith("y") else kind.lower() + "s"
        needed |= {(group, plural, verb) for verb in ("get", "create", "patch")}
    needed |= {("", "pods", "get"), ("", "pods", "delete"), ("", "secrets", "delete")}
    for role in (item for item in manifests if item["kind"] == "Role"):
        needed |= _rights(role["rules"])
    assert needed - held == set()


def test_the_tenant_namespace_template_matches_the_workers_namespace() -> None:
    """The namespaces made ahead carry the labels the worker's `kubectl apply` gives them."""
    from spate.scheduler.backends.k8s_tenancy import tenant_manifests
    from spate.scheduler.config import KubernetesConfig

    namespace = next(item for item in tenant_manifests(KubernetesConfig(), "spate-t-acme",
                                                       "acme", ()) if item["kind"] == "Namespace")
    body = _resource("kubernetes", "kubernetes_namespace_v1", "tenant")
    labels = {unquote(key): unquote(value) for key, value in body["metadata"][0]["labels"].items()}
    assert labels.pop("spate/tenant") == "${each.key}"
    expected = dict(namespace["metadata"]["labels"])
    assert expected.pop("spate/tenant") == "acme"
    assert labels == expected
    variables = load_module(INFRA / "modules" / "kubernetes").variables
    assert unquote(variables["tenant_namespace_prefix"]["default"]) == \
        KubernetesConfig().namespace_prefix
    assert unquote(variables["job_service_account"]["default"]) == \
        KubernetesConfig().service_account


MUTATIONS = {
    "undeclared variable": (
        "modules/kubernetes/main.tf", "SPATE_LOG                  = var.log_level",
        "SPATE_LOG                  = var.log_levle", "var.log_levle is not declared"),
    "unused variable": (
        "modules/aws/variables.tf", 'variable "tags" {',
        'variable "never_used" {\n  type        = string\n  description = "x"\n}\n\n'
        'variable "tags" {', "variable 'never_used' is declared but never used"),
    "missing module output": (
        "examples/aws-eks/main.tf", "module.aws.data_subnet_cidrs",
        "module.aws.data_subnet_cidr", "module aws has no output 'data_subnet_cidr'"),
    "missing required argument": (
        "examples/aws-eks/main.tf", "  image                   = var.image\n", "",
        "required variable 'image' not passed"),
    "unknown argument": (
        "examples/aws-eks/main.tf", "  image                   = var.image\n",
        "  image                   = var.image\n  imagee = var.image\n",
        "unknown argument 'imagee'"),
    "undefined local": (
        "modules/aws/main.tf", "local.private_cidrs[count.index]",
        "local.privat_cidrs[count.index]", "local.privat_cidrs is not defined"),
    "undeclared resource": (
        "modules/kubernetes/outputs.tf", "kubernetes_service_v1.api.metadata[0].name",
        "kubernetes_service_v1.apii.metadata[0].name", "kubernetes_service_v1.apii: no such"),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_a_broken_copy_is_caught(mutation: str, tmp_path: Path) -> None:
    """The static check is real: each kind of mistake, made in a copy, is reported."""
    file, old, new, expected = MUTATIONS[mutation]
    copy = tmp_path / "infra"
    shutil.copytree(INFRA, copy, ignore=shutil.ignore_patterns(".terraform*"))
    path = copy / file
    text = path.read_text()
    assert old in text, f"{file} no longer holds {old!r}: update the mutation"
    path.write_text(text.replace(old, new, 1))
    problems = tree_problems(copy)
    assert any(expected in problem for problem in problems), problems


def _terraform() -> str:
    binary = shutil.which("terraform")
    if binary is None:
        pytest.skip("the terraform binary is not on PATH")
    return binary


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1",
           "TF_INPUT": "0"}
    config = tmp_path / "terraform.rc"
    config.write_text("")
    env["TF_CLI_CONFIG_FILE"] = str(config)
    env.pop("TF_PLUGIN_CACHE_DIR", None)
    return env


def test_terraform_fmt(tmp_path: Path) -> None:
    done = _run([_terraform(), "fmt", "-check", "-recursive", "-diff", "-no-color", "infra"],
                ROOT, _env(tmp_path))
    assert done.returncode == 0, f"terraform fmt would change:\n{done.stdout}{done.stderr}"


def _validate(root: str, tmp_path: Path,
              breakage: tuple[str, str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`terraform init -backend=false && terraform validate` of a copy of ``root``, providers
    from the mirror only; ``breakage`` (file, old, new) is made in the copy first."""
    binary = _terraform()
    mirror = os.environ.get(MIRROR_VARIABLE)
    if not mirror:
        pytest.skip(f"{MIRROR_VARIABLE} is not set: no provider mirror, providers cannot be "
                    "downloaded here")
    module = load_module(INFRA / root)
    missing = sorted(source for source in module.providers.values()
                     if not (Path(mirror) / "registry.terraform.io" / source).is_dir())
    if missing:
        pytest.skip(f"the provider mirror lacks {', '.join(missing)}")
    copy = tmp_path / "infra"
    shutil.copytree(INFRA, copy, ignore=shutil.ignore_patterns(".terraform*"))
    if breakage is not None:
        file, old, new = breakage
        text = (copy / root / file).read_text()
        assert old in text, f"{root}/{file} no longer holds {old!r}"
        (copy / root / file).write_text(text.replace(old, new, 1))
    env = _env(tmp_path)
    Path(env["TF_CLI_CONFIG_FILE"]).write_text(
        "provider_installation {\n"
        f"  filesystem_mirror {{\n    path    = \"{mirror}\"\n"
        "    include = [\"registry.terraform.io/*/*\"]\n  }\n"
        "  direct {\n    exclude = [\"registry.terraform.io/*/*\"]\n  }\n}\n")
    init = _run([binary, "init", "-backend=false", "-input=false", "-no-color"], copy / root, env)
    assert init.returncode == 0, init.stdout + init.stderr
    return _run([binary, "validate", "-no-color"], copy / root, env)


@pytest.mark.parametrize("root", [str(path.relative_to(INFRA)) for path in roots(INFRA)])
def test_terraform_validate(root: str, tmp_path: Path) -> None:
    validate = _validate(root, tmp_path)
    assert validate.returncode == 0, validate.stdout + validate.stderr


def test_terraform_validate_catches_what_the_static_check_cannot(tmp_path: Path) -> None:
    """An argument the provider's schema does not have: only `terraform validate` knows."""
    validate = _validate("modules/aws", tmp_path,
                         ("main.tf", "storage_encrypted ", "storage_encryptid "))
    assert validate.returncode != 0
    assert "storage_encryptid" in validate.stdout + validate.stderr


# -- the image's entry point ---------------------------------------------------------


def _entrypoint(tmp_path: Path, args: list[str], env: dict[str, str]) -> list[str]:
    """Run infra/image/entrypoint.sh with a java and a spark-submit that print their
    arguments, one a line: the command lines it starts."""
    bin_dir = tmp_path / "spark" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("java", "spark-submit"):
        tool = bin_dir / name
        tool.write_text(f'#!/bin/sh\necho {name}\nfor arg in "$@"; do echo "$arg"; done\n')
        tool.chmod(0o755)
    done = subprocess.run(["sh", str(INFRA / "image" / "entrypoint.sh"), *args],
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin",
                               "SPARK_HOME": str(tmp_path / "spark"), **env},
                          capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.splitlines()


def test_image_entrypoint_starts_executors_with_sparks_options_in_order(tmp_path: Path) -> None:
    lines = _entrypoint(tmp_path, ["executor"], {
        "SPARK_EXECUTOR_MEMORY": "2g", "SPARK_JAVA_OPT_0": "-Dspark.a=1 2",
        "SPARK_JAVA_OPT_1": "-Dspark.b=2", "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@d:7078",
        "SPARK_EXECUTOR_ID": "3", "SPARK_EXECUTOR_CORES": "1", "SPARK_APPLICATION_ID": "spark-1",
        "SPARK_EXECUTOR_POD_IP": "10.1.2.3", "SPARK_EXECUTOR_POD_NAME": "job-exec-3"})
    assert lines[:5] == ["java", "-Xms2g", "-Xmx2g", "-Dspark.a=1 2", "-Dspark.b=2"]
    assert "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend" in lines
    pairs = dict(zip(lines[lines.index("--driver-url"):][::2],
                     lines[lines.index("--driver-url") + 1:][::2], strict=False))
    assert pairs == {"--driver-url": "spark://CoarseGrainedScheduler@d:7078",
                     "--executor-id": "3", "--cores": "1", "--app-id": "spark-1",
                     "--hostname": "10.1.2.3", "--resourceProfileId": "0",
                     "--podName": "job-exec-3"}


def test_image_entrypoint_starts_drivers_and_runs_other_commands(tmp_path: Path) -> None:
    lines = _entrypoint(tmp_path, ["driver", "--properties-file", "/opt/spark/conf/p",
                                   "local:///opt/spate/engine/job/main.py"],
                        {"SPARK_DRIVER_BIND_ADDRESS": "10.1.2.4"})
    assert lines == ["spark-submit", "--conf", "spark.driver.bindAddress=10.1.2.4",
                     "--deploy-mode", "client", "--properties-file", "/opt/spark/conf/p",
                     "local:///opt/spate/engine/job/main.py"]
    assert _entrypoint(tmp_path / "other", ["echo", "spate worker"], {}) == ["spate worker"]
