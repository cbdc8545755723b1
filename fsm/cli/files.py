"""Writing a command's output file whole or not at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, _mode(path))
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _mode(path: Path) -> int:
    """The mode an ordinary new file gets (or the existing file's)."""
    if path.exists():
        return path.stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
