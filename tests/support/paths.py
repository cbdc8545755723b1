"""Where things are, for tests in any folder: the repository root and this folder."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

#: tests/support, on ``sys.path`` for every test (``pythonpath`` in pyproject.toml) and
#: on ``PYTHONPATH`` for the child processes that import the helpers here.
SUPPORT = Path(__file__).resolve().parent
#: The repository's root.
ROOT = SUPPORT.parent.parent


def bench_script(name: str) -> ModuleType:
    """The script ``bench/NAME.py`` as a module, loaded once (bench/ is not a package)."""
    key = f"bench_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, ROOT / "bench" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        sys.modules[key] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[key])
    return sys.modules[key]
