"""The run folder: refuse to clobber an earlier run, check it can be written, one writer at a time (lock)."""

from __future__ import annotations

import os
import socket
import tempfile
import warnings
from pathlib import Path

from .checkpoint import CHECKPOINT_NAME, remove_leftover_temps

RUN_FILES = (CHECKPOINT_NAME, "metrics.jsonl", "metrics.csv")
LOCK_NAME = ".lock"


def check_creatable(folder: Path, what: str) -> None:
    """ValueError unless `folder` is a writable folder or can be created: its nearest existing ancestor
    is a folder in which a file can be made (tried with a temp file that is deleted at once, since
    permission bits say nothing for root or on a read-only mount). Nothing stays behind."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"{what} {folder} cannot be created: {existing} is a file, not a folder")
    try:
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as err:
        raise ValueError(f"{what} {folder} cannot be written: {existing}: {err.strerror}") from None


def check_run_folder(out_dir: Path, resume: bool, overwrite: bool) -> None:
    """ValueError when `out_dir` cannot be written, or holds an earlier run and neither resume nor overwrite."""
    if resume and overwrite:
        raise ValueError("resume and overwrite exclude each other: resume continues the run, overwrite replaces it")
    check_creatable(out_dir, "run folder")
    found = [name for name in RUN_FILES if (out_dir / name).exists()]
    if found and not (resume or overwrite):
        raise ValueError(f"run folder {out_dir} already holds a run ({', '.join(found)}); pass --resume to "
                         "continue it, --overwrite to replace it, or choose another --out")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class RunLock:
    """An O_EXCL lock file in the run folder holding "host pid". A lock left by a dead process on
    this host is taken over with a warning; a live one (or another host's) is an error."""

    def __init__(self, out_dir: Path):
        self.path = out_dir / LOCK_NAME
        self.held = False

    def acquire(self) -> None:
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._clear_stale()
                continue
            with os.fdopen(fd, "w") as f:
                f.write(f"{socket.gethostname()} {os.getpid()}\n")
            self.held = True
            return
        raise ValueError(f"run folder {self.path.parent} is locked ({self.path}) and the lock could not be taken")

    def _clear_stale(self) -> None:
        try:
            host, pid = self.path.read_text().split()
            pid = int(pid)
        except (OSError, ValueError):
            host, pid = None, None
        if host == socket.gethostname() and pid is not None and not _alive(pid):
            warnings.warn(f"removing the stale lock {self.path} of process {pid}, which is no longer running",
                          stacklevel=4)
            self.path.unlink(missing_ok=True)
            return
        owner = f"process {pid} on {host}" if pid is not None else "an unknown process"
        raise ValueError(f"run folder {self.path.parent} is in use by {owner} (lock {self.path}); wait for it, or "
                         "delete the lock file if that run is gone")

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False


def prepare(out_dir: Path, resume: bool, overwrite: bool) -> RunLock:
    """Check the folder, create it, take its lock, delete temp files of killed saves and, with overwrite,
    the earlier run (rank 0 only)."""
    check_run_folder(out_dir, resume, overwrite)
    out_dir.mkdir(parents=True, exist_ok=True)
    lock = RunLock(out_dir)
    lock.acquire()
    remove_leftover_temps(out_dir / CHECKPOINT_NAME)
    if overwrite:  # the earlier run goes as a whole, so the folder never mixes two runs
        for name in (*RUN_FILES, "summary.json"):
            (out_dir / name).unlink(missing_ok=True)
    return lock
