"""A package's names loaded from their modules on first use (PEP 562), for the subpackages' ``__all__``."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_getattr(package: str, home: dict[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: ``home`` maps each public name to the module defining it (a name
    equal to its module's is the module itself)."""

    def __getattr__(name: str) -> Any:
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(f"{package}.{home[name]}")
        return module if home[name] == name else getattr(module, name)

    return __getattr__
