"""Field docstrings as JSON Schema descriptions, read when a schema is generated rather than when a model is built.

A contract documents a field with a string right under it (an attribute docstring), and the listed schemas show it
as the field's `description`. pydantic's `use_attribute_docstrings` does that while it builds each model class: on
Python < 3.13 it finds the class's source by walking the stack frames with `inspect.getmodule` (a scan of
`sys.modules`, ~650 modules once the SDK is loaded), tokenizes and parses each class twice. That was ~110 ms of a
server's start-up, though only the JSON Schemas (generated once, at the first `tools/list`) ever read the
descriptions. Here each contracts module's source is parsed once, when a schema first needs it (~12 ms for all of
them), and `describe_fields` (the contracts' `json_schema_extra`) puts each docstring where pydantic put it: on the
field's property, unless the field has a description of its own. tests/test_serve_startup.py checks that every
tool's listed schemas are the same as with `use_attribute_docstrings`.
"""

from __future__ import annotations

import ast
import inspect
import sys
from functools import cache
from typing import Any

from pydantic import BaseModel


def describe_fields(schema: dict[str, Any], cls: type[BaseModel]) -> None:
    """`json_schema_extra` of the contracts: each documented field's docstring as its property's description."""
    properties: dict[str, dict[str, Any]] = schema.get("properties", {})
    for name, field in cls.model_fields.items():
        key = field.alias if field.alias in properties else name
        prop = properties.get(key)
        if prop is None or "description" in prop:  # excluded from this mode's schema, or described by its Field
            continue
        doc = field_docstrings(_declared_in(cls, name)).get(name)
        if doc is not None:
            prop["description"] = doc  # pydantic sorts a schema's keywords once it is complete


def _declared_in(cls: type[BaseModel], name: str) -> type:
    """The class whose body annotates `name` last: a subclass that declares a field again documents it anew
    (an inherited field keeps its parent's docstring, as pydantic copies the parent's field)."""
    return next(base for base in cls.__mro__ if name in vars(base).get("__annotations__", {}))


def field_docstrings(cls: type) -> dict[str, str]:
    """The attribute docstrings in the body of `cls`, by field."""
    return _module_docstrings(cls.__module__).get(cls.__qualname__, {})


@cache
def _module_docstrings(module: str) -> dict[str, dict[str, str]]:
    """For each class in `module` (by qualified name: nested in a class or a function too), its attribute docstrings
    as pydantic reads them: a string statement right after an annotated name, cleaned with `inspect.cleandoc`. No
    source, no docstrings."""
    try:
        source = inspect.getsource(sys.modules[module])
    except (OSError, TypeError, KeyError):
        return {}
    classes: dict[str, dict[str, str]] = {}
    _collect(ast.parse(source).body, "", classes)
    return classes


def _collect(body: list[ast.stmt], prefix: str, classes: dict[str, dict[str, str]]) -> None:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _collect(node.body, f"{prefix}{node.name}.<locals>.", classes)
        if not isinstance(node, ast.ClassDef):
            continue
        docs: dict[str, str] = {}
        for previous, statement in zip(node.body, node.body[1:], strict=False):
            if (
                isinstance(previous, ast.AnnAssign)
                and isinstance(previous.target, ast.Name)
                and isinstance(statement, ast.Expr)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            ):
                docs[previous.target.id] = inspect.cleandoc(statement.value.value)
        classes[f"{prefix}{node.name}"] = docs
        _collect(node.body, f"{prefix}{node.name}.", classes)
