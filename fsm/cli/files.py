"""Writing a command's output file whole or not at all, and only ever a regular file."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from fsm.errors import UsageError


def output_target(output: str) -> Path:
    """The file ``-o OUTPUT`` writes: OUTPUT, or the file a symlink there points to.

    Refused: a directory, a missing folder, and anything that is not a regular file (a
    device such as /dev/null, a FIFO, a socket), which replacing would destroy.
    """
    given = Path(output)
    target = Path(os.path.realpath(given)) if given.is_symlink() else given
    via = f" (the link points to {str(target)!r})" if target != given else ""
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise UsageError(f"-o {output!r}: {exc.strerror or exc}{via}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise UsageError(f"-o {output!r} is a directory{via}; give a file name in it")
    if mode is not None and not stat.S_ISREG(mode):
        raise UsageError(f"-o {output!r} is not a regular file{via} (a device, FIFO or "
                         "socket); give the name of a regular file")
    if not target.parent.is_dir():
        raise UsageError(f"-o {output!r}: the folder {str(target.parent)!r} does not exist")
    return target


def write_atomic(path: Path | str, data: bytes) -> None:
    """Write ``data`` to the regular file ``path`` whole or not at all."""
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
