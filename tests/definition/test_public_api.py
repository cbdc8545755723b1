"""The public API is declared once, in ``fsm.__all__`` (as httpx does)."""

from __future__ import annotations

import inspect
from types import ModuleType

import fsm
import fsm.errors
import fsm.testing


def _public(module: ModuleType) -> list[str]:
    # dir() and getattr(), not vars(): fsm loads its names on first use.
    return [name for name in dir(module)
            if not name.startswith("_") and not isinstance(getattr(module, name), ModuleType)]


def test_all_is_sorted_and_equals_the_exported_names() -> None:
    assert fsm.__all__ == sorted(fsm.__all__)
    assert sorted(fsm.__all__) == sorted(_public(fsm))


def test_every_error_class_is_exported_and_derives_from_fsmerror() -> None:
    errors = {name for name, value in vars(fsm.errors).items()
              if inspect.isclass(value) and issubclass(value, Exception)
              and value.__module__ == "fsm.errors"}
    assert errors <= set(fsm.__all__)
    assert all(issubclass(getattr(fsm, name), fsm.FSMError) for name in errors)


def test_testing_module_exports_what_it_defines() -> None:
    defined = {name for name, value in vars(fsm.testing).items()
               if not name.startswith("_") and getattr(value, "__module__", None) == "fsm.testing"}
    assert fsm.testing.__all__ == sorted(fsm.testing.__all__)
    assert defined | {"JUNK_OUTPUTS", "ScriptExhausted"} == set(fsm.testing.__all__)


def _subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _subclasses(sub)
    return out


def test_every_fsmerror_subclass_lives_in_errors_and_is_drawn_in_its_tree() -> None:
    import fsm.adapters.openai
    import fsm.auditor.verify
    import fsm.cli  # noqa: F401 - load every module that could define an error

    subclasses = _subclasses(fsm.FSMError)
    assert subclasses, "no error classes found"
    assert {c.__module__ for c in subclasses} == {"fsm.errors"}
    tree = fsm.errors.__doc__ or ""
    drawn = {line.lstrip("├└─│ ").split(" ")[0] for line in tree.splitlines()}
    assert {c.__name__ for c in subclasses} <= drawn
    assert {c.__name__ for c in subclasses} <= set(fsm.__all__)


def test_no_bare_fsmerror_is_raised() -> None:
    from pathlib import Path

    root = Path(fsm.__file__).parent
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if "raise FSMError(" in p.read_text()]
    assert offenders == []
