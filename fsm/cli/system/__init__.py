"""What a machine needs for fsm (``fsm doctor``, ``make system``): ``doctor.py`` runs as a
plain script too, before the project's environment exists, so this folder holds nothing
whose name a module of the standard library has."""
