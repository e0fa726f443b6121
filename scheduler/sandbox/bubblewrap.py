"""The command line that runs a job's process inside its sandbox, with bubblewrap.

``bwrap`` (run as root by the scheduler) builds a fresh root file system for
the process out of read-only binds of what it needs to run — the system's
programs and libraries, a few files of ``/etc``, Python with its packages,
Java, Spate's engine and state store — plus read-write binds of the folders
the job may write (its job folder, the tenant's storage root, state folder
and checkpoints), a private ``/tmp``, its own ``/proc`` and a minimal
``/dev``. It gets new PID, IPC and UTS namespaces and an environment built
from scratch. Inside, ``setpriv`` drops to the tenant's unprivileged user
with no groups, no capabilities and ``no_new_privs`` before Python starts.

Everything else on the host — the server's data folder, its keys and
database, other tenants' folders, ``/root``, ``/home`` — is simply absent
from the sandbox's file system.
"""

from __future__ import annotations

import glob
import os
import shutil
import site
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from spate import engine, statestore

BWRAP = "bwrap"
SETPRIV = "/usr/bin/setpriv"
#: Top-level system folders bound read-only (symbolic links among them are re-created).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Files and folders of /etc that programs read to run: the loader, names, TLS, time, Java.
ETC_PATHS = ("/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
             "/etc/hosts", "/etc/resolv.conf", "/etc/nsswitch.conf", "/etc/host.conf",
             "/etc/gai.conf", "/etc/ssl", "/etc/ca-certificates", "/etc/pki",
             "/etc/localtime", "/etc/timezone", "/etc/mime.types", "/etc/protocols",
             "/etc/services")
ETC_GLOBS = ("/etc/java-*",)


def runtime_paths() -> list[str]:
    """What a job's Python needs to read besides the system: the interpreter, its
    packages, Spate's engine and state store, and Java."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix,
             str(Path(sys.executable).resolve().parent.parent)}
    paths.update(p for p in site.getsitepackages() if os.path.isdir(p))
    user_site = site.getusersitepackages()
    if isinstance(user_site, str) and os.path.isdir(user_site):
        paths.add(user_site)
    for package in (engine, statestore):
        paths.add(str(Path(str(package.__file__)).resolve().parent))
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.isdir(java_home):
        paths.add(str(Path(java_home).resolve()))
    java = shutil.which("java")
    if java:
        paths.add(str(Path(java).resolve().parent.parent))
    return sorted(_outermost(p for p in paths if not p.startswith(SYSTEM_PATHS)))


def command(argv: Sequence[str], *, uid: int, gid: int, writable: Iterable[str],
            readable: Iterable[str], environment: Mapping[str, str], working_dir: str,
            files: Mapping[str, str] | None = None) -> list[str]:
    """The bwrap and setpriv command line running ``argv`` as ``uid``/``gid``.

    ``files`` maps a path inside the sandbox to a host file bound read-only
    over it (``/etc/passwd`` naming the tenant's user, for example).
    """
    args = [BWRAP, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--hostname", "spate-job", "--clearenv"]
    # What is in place so far: binds (whose insides exist) and folders made or mounted.
    mounted: list[str] = []
    made: set[str] = set()

    def mount(option: str, source: str, target: str) -> None:
        args.extend(_parents(target, mounted, made))
        args.extend([option, source, target])
        mounted.append(target)

    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            args.extend(["--symlink", os.readlink(path), path])
            made.add(path)
        elif os.path.isdir(path):
            mount("--ro-bind", path, path)
    for path in [*ETC_PATHS, *sorted(p for g in ETC_GLOBS for p in glob.glob(g))]:
        if os.path.lexists(path):
            mount("--ro-bind", path, path)
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]
    made.update(("/proc", "/dev", "/tmp"))
    for path in readable:
        mount("--ro-bind", path, path)
    for path in writable:
        mount("--bind", path, path)
    for target, source in (files or {}).items():
        mount("--ro-bind", source, target)
    args += ["--chdir", working_dir]
    for key, value in sorted(environment.items()):
        args += ["--setenv", key, value]
    return [*args, "--", SETPRIV, f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
            "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", *argv]


def _parents(target: str, mounted: list[str], made: set[str]) -> list[str]:
    """``--dir`` options creating the folders above ``target`` that no bind holds and
    nothing made yet, world-traversable (bwrap would make them owner-only)."""
    options: list[str] = []
    parent = os.path.dirname(os.path.normpath(target))
    chain: list[str] = []
    while parent not in ("/", ""):
        chain.append(parent)
        parent = os.path.dirname(parent)
    for folder in reversed(chain):
        if folder in made or any(folder == m or folder.startswith(m.rstrip("/") + "/")
                                 for m in mounted):
            continue
        options += ["--perms", "0755", "--dir", folder]
        made.add(folder)
    return options


def _outermost(paths: Iterable[str]) -> list[str]:
    """The paths that are not inside another of them (binding those covers the rest)."""
    ordered = sorted({os.path.normpath(p) for p in paths})
    kept: list[str] = []
    for path in ordered:
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept
