"""The package's architecture, read from its source: one folder per layer, imports point downward
only, no import cycle (imports inside functions included), nothing imports the CLI, few top-level modules,
and code outside a subpackage uses it only through the names of its ``__all__``."""

from __future__ import annotations

import ast
import importlib
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "solbench"
# Lowest first: a module may import its own layer and the ones below it, never one above.
LAYERS = ["errors", "units", "settings", "_version", "_lazy", "data", "timing", "guards", "worker", "engine", "dispatch", "present", "api", "serve", "cli"]
RANK = {"errors": 0, "units": 0, "settings": 0, "_version": 0, "_lazy": 0,
        **{name: i for i, name in enumerate(LAYERS) if i >= 5}}
MAX_TOP_LEVEL_MODULES = 8  # besides __init__, __main__ and _version


def _modules() -> dict[str, Path]:
    out = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        if "_shipped" in f.parts:
            continue
        parts = list(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


MODULES = _modules()


def _subpackage(name: str) -> str | None:
    """The subpackage (``data``, ``engine``, ...) a dotted module name lies in, or None."""
    parts = name.split(".")
    package = ".".join(parts[:2])
    return parts[1] if len(parts) > 1 and package in MODULES and MODULES[package].name == "__init__.py" else None


@cache
def _package(name: str) -> tuple[frozenset[str], dict[str, str]]:
    """A subpackage's ``__all__``, and where its lazily loaded names live (its ``_HOME``: name -> module)."""
    package = importlib.import_module(name)
    return frozenset(package.__all__), dict(getattr(package, "_HOME", {}))


def _targets(node: ast.AST, module: str) -> list[str]:
    """Modules an import statement loads (``from pkg import sub`` counts as ``pkg.sub`` if that is a module,
    and a name a package loads lazily counts as the module it comes from)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith("solbench")]
    if not isinstance(node, ast.ImportFrom) or node.level or not (node.module or "").startswith("solbench"):
        assert not getattr(node, "level", 0), f"{module}: relative import"
        return []
    lazy = _package(node.module)[1] if _subpackage(node.module) and node.module.count(".") == 1 else {}
    return [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES
            else f"{node.module}.{lazy[a.name]}" if a.name in lazy else node.module for a in node.names]


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(module: str, top_level_only: bool) -> set[str]:
    tree = ast.parse(MODULES[module].read_text())
    found: set[str] = set()
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if _is_type_checking(node):
            continue
        found.update(_targets(node, module))
        if isinstance(node, (ast.If, ast.Try)) or not top_level_only:
            stack.extend(ast.iter_child_nodes(node))
    return found & set(MODULES)


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_few_top_level_modules_and_a_folder_per_layer():
    top = [f.stem for f in PACKAGE.glob("*.py") if f.stem not in ("__init__", "__main__", "_version")]
    subpackages = [d.name for d in PACKAGE.iterdir() if (d / "__init__.py").is_file()]
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top
    assert set(subpackages) >= {"data", "engine", "worker", "timing", "guards", "present", "cli"}


def test_every_module_belongs_to_a_layer():
    unknown = {m for m in MODULES if _layer(m) not in RANK and m not in ("solbench", "solbench.__main__")}
    assert not unknown


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) in RANK))
def test_imports_point_downward(module):
    """Lazy imports inside functions count too: a layer never reaches up."""
    up = sorted(t for t in _imports(module, top_level_only=False)
                if _layer(t) in RANK and RANK[_layer(t)] > RANK[_layer(module)])
    assert not up, f"{module} imports a higher layer: {up}"


def test_nothing_imports_the_cli():
    users = sorted(m for m in MODULES if _layer(m) != "cli" and m != "solbench.__main__"
                   and any(_layer(t) == "cli" for t in _imports(m, top_level_only=False)))
    assert not users


def _cycle() -> list[str] | None:
    """A cycle of imports, those inside functions included (a lazy import still ties two modules), or None."""
    graph = {m: _imports(m, top_level_only=False) - {m} for m in MODULES}
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(m: str, path: list[str]) -> list[str] | None:
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                return path[path.index(t):] + [t] if t in path else [m, t]
            if t not in state and (found := visit(t, path + [t])):
                return found
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m, [m])):
            return found
    return None


def test_no_import_cycle():
    assert _cycle() is None, " -> ".join(_cycle() or [])


@pytest.mark.parametrize("fake", [
    {"solbench.data.a": "from solbench.data.b import x\n", "solbench.data.b": "import solbench.data.a\n"},
    # the cycle the data layer had: one side imports the other only inside a method
    {"solbench.data.a": "class P:\n    def work(self):\n        from solbench.data.b import cost\n",
     "solbench.data.b": "from solbench.data.a import P\n"},
    {"solbench.data.a": "def f():\n    import solbench.data.b\n", "solbench.data.b": "def g():\n    import solbench.data.c\n",
     "solbench.data.c": "try:\n    from solbench.data.a import f\nexcept ImportError:\n    pass\n"},
], ids=["module level", "in a method", "three, all lazy"])
def test_the_cycle_finder_finds_a_cycle(monkeypatch, fake):
    """The check above can fail: a planted cycle is reported, at module level or inside functions."""
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: fake.get(str(self), ""))
    for name in fake:
        monkeypatch.setitem(MODULES, name, Path(name))
    found = _cycle()
    assert found is not None and set(found) == set(fake), found


def bypasses(source: str, layer: str, public: dict[str, frozenset[str]] | None = None) -> list[str]:
    """Imports in ``source`` (of a module in ``layer``) that reach into another subpackage past its ``__all__``:
    a module inside it (``from solbench.data.problem import ...``, ``import solbench.data.problem``), or a
    name its ``__all__`` does not list. Imports inside functions count too."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _subpackage(a.name) not in (None, layer) and a.name.count(".") > 1]
        elif isinstance(node, ast.ImportFrom) and (sub := _subpackage(node.module or "")) not in (None, layer):
            if node.module != f"solbench.{sub}":
                found.append(f"from {node.module} import ...")
                continue
            names = (public or {}).get(sub) or _package(node.module)[0]
            found += [f"from {node.module} import {a.name}" for a in node.names if a.name not in names]
    return found


def test_other_layers_use_a_subpackage_through_its_all():
    found = [f"{m}: {b}" for m in sorted(MODULES)
             for b in bypasses(MODULES[m].read_text(), _layer(m))]
    assert not found, "import these through the subpackage (add the name to its __all__):\n" + "\n".join(found)


@pytest.mark.parametrize("source, flagged", [
    ("from solbench.data.problem import Problem\n", True),
    ("def f():\n    from solbench.data.problem import Problem\n", True),
    ("import solbench.data.problem\n", True),
    ("from solbench.data import not_public\n", True),
    ("from solbench.data import Problem\n", False),
    ("from solbench.engine.runner import Runner\n", False),  # its own subpackage
    ("from solbench.errors import SolbenchError\n", False),  # a top-level module
])
def test_the_all_check_finds_a_bypass(source, flagged):
    """The check above can fail: a planted import past ``__all__`` is reported, one through it is not."""
    public = {"data": frozenset({"Problem"})}
    assert bool(bypasses(source, "engine", public)) is flagged


@pytest.mark.parametrize("package", sorted({f"solbench.{_subpackage(m)}" for m in MODULES if _subpackage(m)}))
def test_a_public_name_that_names_a_module_is_that_module(package):
    """Once ``solbench.x.y`` is imported, ``solbench.x.y`` the attribute is the module: a public name ``y`` of
    ``solbench.x`` meant as something else (a function ``y`` of another module) would change with import order."""
    public, home = _package(package)
    clashes = sorted(n for n in public if f"{package}.{n}" in MODULES and home.get(n, n) != n)
    assert not clashes, f"{package}: export the module, or the name under another one: {clashes}"
