"""The layer picture in README.md and docs/engine.md says what the code does: the same picture in
both, every layer listed, and each layer's imports as the source has them (lazy ones included)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "solbench"
DOCS = [ROOT / "README.md", ROOT / "docs" / "engine.md"]
BASE = {"errors", "units", "settings", "_version", "_lazy"}  # the picture leaves these out: every layer may use them
ROW = re.compile(r"^│ (?P<layer>[a-z_]+)(?:/|\.py) *│──> (?P<imports>.*?)(?:  .*)?$")


def _picture(doc: Path) -> str:
    blocks = [b for b in re.findall(r"```text\n(.*?)```", doc.read_text(encoding="utf-8"), re.S) if "│ cli/" in b]
    assert len(blocks) == 1, f"{doc.name}: expected one layer picture"
    return blocks[0]


def _drawn(picture: str) -> dict[str, set[str]]:
    rows = {}
    for line in picture.splitlines():
        if m := ROW.match(line):
            names = m["imports"].strip()
            rows[m["layer"]] = set() if names == "-" else {n.strip() for n in names.split(",")}
    return rows


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _actual() -> dict[str, set[str]]:
    modules = {}
    for f in PACKAGE.rglob("*.py"):
        if "_shipped" not in f.parts:
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    out: dict[str, set[str]] = {}
    for name, f in modules.items():
        found = out.setdefault(_layer(name), set())
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                           for a in node.names]
            else:
                continue
            found.update(_layer(t) for t in targets if t.startswith("solbench") and t in modules)
    return {layer: deps - BASE - {layer, "__init__"} for layer, deps in out.items()
            if layer not in BASE | {"__init__", "__main__"}}


def test_the_layer_picture_is_the_same_in_readme_and_engine_doc():
    assert _picture(DOCS[0]) == _picture(DOCS[1])


def test_the_layer_picture_matches_the_imports():
    drawn, actual = _drawn(_picture(DOCS[0])), _actual()
    assert drawn == actual, ("the layer picture in README.md and docs/engine.md is out of date: "
                             f"drawn {drawn}, imported {actual}")
