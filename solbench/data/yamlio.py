"""YAML reading that refuses duplicate keys and reports syntax errors on one line; file -> checked model.

Problem and spec files come from anyone, so reading is bounded before anything else looks at them:
at most :data:`MAX_FILE_BYTES`, nested at most :data:`MAX_DEPTH` deep and :data:`MAX_NODES` values
(aliases counted as expanded, so a "billion laughs" file is refused), no recursive alias, and no
control character in any string (a name or a description could otherwise drive the terminal).
Every refusal is one line with the line and column it found.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from solbench.errors import validation_lines

Model = TypeVar("Model", bound=BaseModel)

# The shipped problem and spec files are under 4 KB and 6 levels deep; a 50 MB file took 20 s to parse.
MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_NODES = 20_000  # values; PyYAML composes about 60,000 a second
# C0 and C1 controls but tab and newline, and the bidirectional overrides (text that reads one way
# and runs another).
_FORBIDDEN_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


class _Refused(yaml.MarkedYAMLError):
    """A file that parses but is refused: too deep, too many values, a control character."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys and the bounds in the module docstring while composing."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0
        self._count = 0  # values composed so far (refused early: a flat list of 500,000 takes seconds)
        self._measures: dict[int, tuple[int, int]] = {}  # id(node) -> (values, depth), aliases expanded

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            node = super().compose_node(parent, index)
            if id(node) not in self._measures:
                raise _Refused(None, None, "an alias refers to a collection that contains it (recursive alias)", mark)
            return node
        self._depth += 1
        self._count += 1
        if self._count > MAX_NODES:
            raise _Refused(None, None, f"more than {MAX_NODES} values", self.peek_event().start_mark)
        if self._depth > MAX_DEPTH:
            raise _Refused(None, None, f"nested more than {MAX_DEPTH} levels deep", self.peek_event().start_mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        self._measures[id(node)] = _measure(node, self._measures)
        return node

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as err:  # an integer of 5,000 digits, a float Python refuses
            raise _Refused(None, None, f"bad value ({err})", node.start_mark) from None


def _measure(node: yaml.Node, measures: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """(values, depth) of a node with its aliases expanded; refuses too many, too deep, control characters."""
    if isinstance(node, yaml.ScalarNode):
        bad = _FORBIDDEN_CHARS.search(node.value)
        if bad is not None:
            raise _Refused(None, None, f"control character U+{ord(bad.group()):04X} in a string (not allowed)",
                           node.start_mark)
        return 1, 1
    children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else node.value
    sizes = [measures[id(c)] for c in children]
    values = 1 + sum(v for v, _ in sizes)
    depth = 1 + max((d for _, d in sizes), default=0)
    if values > MAX_NODES:
        raise _Refused(None, None, f"more than {MAX_NODES} values (aliases counted expanded)", node.start_mark)
    if depth > MAX_DEPTH:
        raise _Refused(None, None, f"nested more than {MAX_DEPTH} levels deep (aliases expanded)", node.start_mark)
    return values, depth


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            raise _Refused(None, None, f"a key must be a plain value, not a {type(key).__name__}",
                           key_node.start_mark) from None
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


def _refuse_tag(loader: _UniqueKeyLoader, node: yaml.Node) -> None:
    raise _Refused(None, None, f"YAML type {node.tag.rpartition(':')[2]!r} is not allowed (plain values only: "
                   "text, numbers, true/false, null, lists, mappings)", node.start_mark)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
# JSON-like values only, as every reader (pydantic, the JSON outputs) expects: dates stay text, and
# !!binary, !!set, !!omap, !!pairs, !!timestamp are refused.
for _tag in ("binary", "set", "omap", "pairs", "timestamp"):
    _UniqueKeyLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse_tag)
_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class YamlError(Exception):
    """One-line description of why a YAML file could not be read."""


def _read_text(path: Path) -> str:
    """The file's text: a regular file of at most MAX_FILE_BYTES, UTF-8."""
    try:
        # Non-blocking: opening a FIFO named problem.yaml must not wait for a writer.
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise YamlError("not a regular file")
            raw = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise YamlError("file not found") from None
    except OSError as err:
        raise YamlError(f"cannot read file ({err.__class__.__name__}: {err.strerror or err})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise YamlError(f"larger than {MAX_FILE_BYTES >> 20} MiB (problem and spec files are a few KB)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise YamlError(f"not UTF-8 text (byte {err.start}: {err.reason})") from None


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """Read a YAML file that must hold a mapping; raise YamlError with a one-line reason."""
    text = _read_text(path)
    if not text.strip():
        raise YamlError("file is empty")
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - SafeLoader subclass
    except _Refused as err:
        raise YamlError(f"{_where(err.problem_mark)}{err.problem}") from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        raise YamlError(f"YAML syntax error at {_where(mark)}{err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise YamlError(f"YAML error: {' '.join(str(err).split())}") from None
    if data is None:
        raise YamlError("file is empty")
    if not isinstance(data, dict):
        raise YamlError(f"top level must be a mapping of keys, not a {type(data).__name__}")
    return data


def read_yaml_file(path: Path, error: Callable[[list[str]], Exception]) -> dict[str, Any]:
    """:func:`read_yaml_mapping`, a failure raised as ``error(["file: reason"])``."""
    try:
        return read_yaml_mapping(path)
    except YamlError as err:
        raise error([_one_line(f"{path}: {err}")]) from None


def checked_model(model: type[Model], data: dict[str, Any], path: Path | None, schema: str,
                  error: Callable[[list[str]], Exception], checks: Callable[[Model], list[str]],
                  partial_checks: Callable[[Model], list[str]] | None = None) -> Model:
    """``data`` validated as ``model`` (loaded from ``path``), then ``checks``; failures raise ``error``.

    ``error`` gets 'file: key: why' lines: pydantic's, worded for YAML authors, then those of
    ``partial_checks`` run on the data without the keys pydantic refused (see :func:`_checks_without`);
    or, when the schema holds, those of ``checks``.
    """
    label = str(path) if path else f"<{schema}>"
    try:
        obj = model.model_validate(data)
    except ValidationError as err:
        # Every error at once: the schema's, then those the checks still find in what is left valid.
        lines = validation_lines(err, schema) + _checks_without(model, data, err, path, partial_checks)
        raise error([_one_line(f"{label}: {line}") for line in lines]) from None
    obj._path = path.resolve() if path else None  # a private attribute of problems and specs: checks read it
    errs = checks(obj)
    if errs:
        raise error([_one_line(f"{label}: {line}") for line in errs])
    return obj


MAX_PRUNE_ROUNDS = 8


def _prune(data: Any, loc: tuple) -> tuple | None:
    """Remove the deepest value of ``data`` on the path ``loc``; return the path removed (None: the root)."""
    parent, key, node, path = None, None, data, ()
    for part in loc:
        if isinstance(node, dict) and part in node:
            parent, key, node, path = node, part, node[part], (*path, part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            parent, key, node, path = node, part, node[part], (*path, part)
        else:
            break  # a union's branch name, or a key that is missing: the value to remove is this one
    if parent is None:
        return None
    del parent[key]
    return path


def _checks_without(model: type[Model], data: dict[str, Any], err: ValidationError, path: Path | None,
                    checks: Callable[[Model], list[str]] | None) -> list[str]:
    """The lines of ``checks`` on ``data`` less every value the schema refused, where what is left is
    valid; a line that names a removed key or name is left out (it would only echo a schema error)."""
    if checks is None:
        return []
    import copy

    trimmed, removed = copy.deepcopy(data), []
    for _ in range(MAX_PRUNE_ROUNDS):
        for e in sorted(err.errors(), key=lambda e: [str(p) for p in e["loc"]], reverse=True):
            loc = tuple(e["loc"])
            if e["type"] == "missing":  # a required key gone: the value that holds it goes
                loc = loc[:-1]
            gone = _prune(trimmed, loc)
            if gone is None:
                return []  # the top level itself is wrong: nothing left to check
            removed.append(gone)
        try:
            obj = model.model_validate(trimmed)
            break
        except ValidationError as again:
            err = again
    else:
        return []
    obj._path = path.resolve() if path else None
    return [line for line in checks(obj) if not _mentions(line, removed)]


def _mentions(line: str, removed: list[tuple]) -> bool:
    """Whether an error line is about a removed value: its key lies under one, or it names one."""
    key = re.sub(r"\[(\d+)\]", r".\1", line.split(": ", 1)[0].split(" ", 1)[0])
    for gone in removed:
        # Up to a list index: removing a list's item renumbers the rest, so every line under the list goes.
        cut = next((i for i, p in enumerate(gone) if isinstance(p, int)), len(gone))
        prefix = ".".join(map(str, gone[:min(2, cut)]))
        names = {str(p) for p in gone[1:2] if isinstance(p, str)}
        if key == prefix or key.startswith(prefix + ".") or any(re.search(rf"\b{re.escape(n)}\b", line) for n in names):
            return True
    return False


def _one_line(line: str) -> str:
    """An error line stays one line when it quotes a key or name that holds a newline or a tab."""
    return line.replace("\n", "\\n").replace("\t", "\\t")

