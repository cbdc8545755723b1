"""Moved to ``fsm/cli/system/doctor.py`` (``fsm doctor``, ``make system``); this name keeps
working for one more release, as a module and as a script."""

import os as _os
import runpy as _runpy
import sys as _sys
import warnings as _warnings

if __name__ == "__main__":
    _sys.stderr.write("fsm/doctor.py moved to fsm/cli/system/doctor.py; run that\n")
    _runpy.run_path(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "cli",
                                  "system", "doctor.py"), run_name="__main__")
else:
    from fsm.cli.system.doctor import *  # noqa: F403

    _warnings.warn("fsm.doctor moved to fsm.cli.system.doctor; import it from there",
                   DeprecationWarning, stacklevel=2)
