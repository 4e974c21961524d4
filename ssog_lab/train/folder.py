"""The run folder: refuse to clobber an earlier run, check it can be written, one writer at a time (lock)."""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
import warnings
from pathlib import Path

from .atomic import remove_leftover_temps
from .checkpoint import CHECKPOINT_NAME

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


def export_sidecar(export: Path) -> Path:
    """The metadata file written beside an --export file: the same path with .json."""
    return export.with_suffix(".json")


def check_export(export: Path, out_dir: Path, overwrite: bool) -> None:
    """ValueError, before any training, when --export would destroy something: a file of this or another run
    folder (a checkpoint above all, even with overwrite), a folder, a path that is its own .json sidecar, or
    (without overwrite) an existing file or sidecar. The export's folder must be creatable."""
    sidecar = export_sidecar(export)
    if sidecar.resolve() == export.resolve():
        raise ValueError(f"--export {export} would hold both the weights and their .json metadata; choose a name "
                         "that does not end in .json")
    names = (*RUN_FILES, "summary.json", LOCK_NAME)
    clash = [p for p in (export, sidecar) if p.resolve() in {(out_dir / n).resolve() for n in names}
             or (p.name in names and any((p.parent / n).exists() for n in RUN_FILES))]  # this run's or another's
    if clash:
        raise ValueError(f"--export {export} would replace {clash[0]}, a file of a run folder; export elsewhere")
    if export.is_dir():
        raise ValueError(f"--export {export} is a folder; give a file name")
    existing = [str(p) for p in (export, sidecar) if p.exists()]
    if existing and not overwrite:
        raise ValueError(f"--export would replace {' and '.join(existing)}; pass --overwrite to replace, or choose "
                         "another path")
    check_creatable(export.parent, "--export folder")


class RunLock:
    """An OS-level lock (flock) on the file `.lock` in the run folder, which holds "host pid" for the messages.
    The kernel drops the lock when its process dies, however it dies, so a dead run never blocks a later one:
    a lock file left by a kill is taken over with a warning naming its process, an empty one left by a full
    disk silently. A live holder makes acquire() a ValueError naming it."""

    def __init__(self, out_dir: Path):
        self.path = out_dir / LOCK_NAME
        self.fd: int | None = None

    def acquire(self) -> None:
        for _ in range(3):  # a holder that releases between our open() and flock() unlinks the file we opened
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = os.pread(fd, 200, 0).decode(errors="replace").split()
                os.close(fd)
                who = f"process {owner[1]} on {owner[0]}" if len(owner) == 2 else "another process"
                raise ValueError(f"run folder {self.path.parent} is in use by {who} (lock {self.path}); wait for "
                                 "it to finish") from None
            except OSError as err:  # a file system without locks
                os.close(fd)
                raise OSError(err.errno, err.strerror, str(self.path)) from err
            if self._names(fd):
                self._claim(fd)
                return
            os.close(fd)
        raise ValueError(f"run folder {self.path.parent}: its lock {self.path} could not be taken")

    def _names(self, fd: int) -> bool:
        """Whether the path still names the file locked through `fd` (no releasing holder unlinked it)."""
        try:
            return os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False

    def _claim(self, fd: int) -> None:
        """Write "host pid" into the locked file, warning when a dead process left its name there."""
        self.fd = fd
        left = os.pread(fd, 200, 0).decode(errors="replace").split()
        if left:
            warnings.warn(f"taking over the stale lock {self.path} of process {' on '.join(reversed(left))}, "
                          "which is no longer running", stacklevel=4)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{socket.gethostname()} {os.getpid()}\n".encode(), 0)
        except OSError as err:
            self.release()
            raise OSError(err.errno, err.strerror, str(self.path)) from err

    def release(self) -> None:
        if self.fd is not None:
            self.path.unlink(missing_ok=True)  # before unlocking, so no one locks a file that is going away
            os.close(self.fd)
            self.fd = None


def prepare(out_dir: Path, resume: bool, overwrite: bool) -> RunLock:
    """Check the folder, create it, take its lock, delete temp files of killed saves and, with overwrite,
    the earlier run (rank 0 only)."""
    check_run_folder(out_dir, resume, overwrite)
    out_dir.mkdir(parents=True, exist_ok=True)
    lock = RunLock(out_dir)
    lock.acquire()
    for name in (*RUN_FILES, "summary.json"):
        remove_leftover_temps(out_dir / name)
    if overwrite:  # the earlier run goes as a whole, so the folder never mixes two runs
        for name in (*RUN_FILES, "summary.json"):
            (out_dir / name).unlink(missing_ok=True)
    return lock
