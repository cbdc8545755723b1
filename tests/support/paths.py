"""Where things are, for tests in any folder: the repository root and this folder."""

from __future__ import annotations

from pathlib import Path

#: tests/support, on ``sys.path`` for every test (``pythonpath`` in pyproject.toml) and
#: on ``PYTHONPATH`` for the child processes that import the helpers here.
SUPPORT = Path(__file__).resolve().parent
#: The repository's root.
ROOT = SUPPORT.parent.parent
