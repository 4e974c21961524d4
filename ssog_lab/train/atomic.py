"""The one writer of whole files for everything a run produces (checkpoints, exports and their .json,
summary.json, the rewritten metrics files): temp file in the target's folder, fsync, os.replace, fsync of
the folder. A crash at any moment leaves either the old file or the new one, never a partial one, and a
failed write (a full disk) names the file it was writing. The metrics logs grow by `append` (a kill may
leave half a line; a resume rewrites them whole from its checkpoint's records)."""

from __future__ import annotations

import os
from pathlib import Path


def temp_name(path: Path) -> Path:
    """The one temp file per target (only rank 0 writes), so a killed write leaves at most one leftover."""
    return path.with_name(f".{path.name}.tmp")


def remove_leftover_temps(path: Path) -> list[Path]:
    """Delete the temp file a killed write of `path` left behind; the files removed."""
    temp = temp_name(path)
    if not temp.is_file():
        return []
    temp.unlink(missing_ok=True)
    return [temp]


def atomic_write(path: str | Path, data: bytes | memoryview | str) -> None:
    """Replace `path` by `data` (str: UTF-8) atomically and durably. An OSError (ENOSPC, EACCES, ...)
    is raised again with `path` as its filename, whichever step failed; the temp file is removed."""
    path = Path(path)
    temp = temp_name(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temp, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)  # make the rename itself durable
        finally:
            os.close(folder)
    except OSError as err:
        temp.unlink(missing_ok=True)
        raise OSError(err.errno, err.strerror or str(err), str(path)) from err
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def append(path: Path, text: str) -> None:
    """Append `text` to `path`; an OSError (a full disk) is raised again with `path` as its filename."""
    try:
        with open(path, "a", newline="") as f:
            f.write(text)
    except OSError as err:
        raise OSError(err.errno, err.strerror or str(err), str(path)) from err
