"""YAML reading that refuses duplicate keys and reports syntax errors on one line; file -> checked model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from solbench.errors import validation_lines

Model = TypeVar("Model", bound=BaseModel)


class _UniqueKeyLoader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class YamlError(Exception):
    """One-line description of why a YAML file could not be read."""


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """Read a YAML file that must hold a mapping; raise YamlError with a one-line reason."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise YamlError("file not found") from None
    except (OSError, UnicodeDecodeError) as err:
        raise YamlError(f"cannot read file ({err.__class__.__name__}: {err})") from None
    if not text.strip():
        raise YamlError("file is empty")
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise YamlError(f"YAML syntax error at {where}{err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise YamlError(f"YAML error: {err}") from None
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
        raise error([f"{path}: {err}"]) from None


def checked_model(model: type[Model], data: dict[str, Any], path: Path | None, schema: str,
                  error: Callable[[list[str]], Exception], checks: Callable[[Model], list[str]]) -> Model:
    """``data`` validated as ``model`` (loaded from ``path``), then ``checks``; failures raise ``error``.

    ``error`` gets 'file: key: why' lines: pydantic's, worded for YAML authors, else those of ``checks``.
    """
    label = str(path) if path else f"<{schema}>"
    try:
        obj = model.model_validate(data)
    except ValidationError as err:
        raise error([f"{label}: {line}" for line in validation_lines(err, schema)]) from None
    obj._path = path.resolve() if path else None  # a private attribute of problems and specs: checks read it
    errs = checks(obj)
    if errs:
        raise error([f"{label}: {line}" for line in errs])
    return obj

