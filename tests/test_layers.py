"""The package's architecture, read from its source: one folder per layer, imports point downward
only, no import cycle (imports inside functions included), nothing imports the CLI, few top-level modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "solbench"
# Lowest first: a module may import its own layer and the ones below it, never one above.
LAYERS = ["errors", "units", "settings", "_version", "data", "timing", "guards", "worker", "engine", "dispatch", "present", "api", "serve", "cli"]
RANK = {"errors": 0, "units": 0, "settings": 0, "_version": 0, **{name: i for i, name in enumerate(LAYERS) if i >= 4}}
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


def _targets(node: ast.AST, module: str) -> list[str]:
    """Modules an import statement loads (``from pkg import sub`` counts as ``pkg.sub`` if that is a module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith("solbench")]
    if not isinstance(node, ast.ImportFrom) or node.level or not (node.module or "").startswith("solbench"):
        assert not getattr(node, "level", 0), f"{module}: relative import"
        return []
    return [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module for a in node.names]


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
