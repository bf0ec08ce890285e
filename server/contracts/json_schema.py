"""The JSON Schemas the tools are listed with: pydantic's, reshaped so clients validate results cheaply.

Clients validate every structured result against the tool's output schema (the MCP Python client with
`jsonschema`, per call). Two shapes of pydantic's schema make that validation slow without saying more:
`$ref` into `$defs` (each reference is a lookup) and optional fields as `anyOf: [X, {"type": "null"}]` (each
alternative is validated on its own, and a null first fails X). Inlining the references and writing such a
union as X with `"type": [T, "null"]` accepts exactly the same documents: X's other keywords either apply
only to instances of its type T (`properties` ignores a null) or are an `enum`/`const`, which gain the null.
That cut the Python client's validation of a ten-result search page from 3.8 to 2.5 ms. Titles and
descriptions stay.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, models_json_schema

NULL: dict[str, Any] = {"type": "null"}
ANNOTATIONS = frozenset({"title", "description", "default", "examples"})
TYPE_BOUND = frozenset(
    {
        # Keywords that constrain only instances of one type: a null passes them whatever their value.
        *("properties", "required", "additionalProperties", "patternProperties", "propertyNames"),
        *("minProperties", "maxProperties", "items", "prefixItems", "minItems", "maxItems", "uniqueItems"),
        *("contains", "minLength", "maxLength", "pattern", "format", "minimum", "maximum"),
        *("exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    }
)


class ListedSchema(GenerateJsonSchema):
    """pydantic's schema generator, with the default of a field encoded without building a serializer for a plain
    None, string, integer or boolean (each is its own JSON): pydantic builds a TypeAdapter per default, ~100 of
    them per listing, a tenth of its time."""

    def encode_default(self, dft: Any) -> Any:
        if dft is None or type(dft) in (str, int, bool):
            return dft
        return super().encode_default(dft)


def output_schemas(models: Sequence[type[BaseModel]]) -> list[dict[str, Any]]:
    """The output schemas of tools whose results are `models`, as they are listed to clients. Generated together:
    the models share most of their parts (pages, scopes, refs), whose schemas and definition names pydantic then
    works out once instead of once per tool."""
    refs, top = models_json_schema(
        [(model, "serialization") for model in models], by_alias=True, schema_generator=ListedSchema
    )
    defs: dict[str, Any] = top.get("$defs", {})
    schemas = []
    for model in models:
        name = refs[(model, "serialization")]["$ref"].removeprefix("#/$defs/")
        schemas.append(_reshape(defs[name], defs, (name,)))
    return schemas


def _reshape(node: Any, defs: dict[str, Any], inlining: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_reshape(item, defs, inlining) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in inlining:
            raise ValueError(f"recursive schema {name}: it cannot be inlined")
        # Keywords beside a $ref (a field's description or default) apply together with the definition's.
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        return {**_reshape(defs[name], defs, (*inlining, name)), **_reshape(siblings, defs, inlining)}
    out = {
        # A properties map's keys are field names (a field may be called "title"), not keywords.
        key: {name: _reshape(sub, defs, inlining) for name, sub in value.items()}
        if key in ("properties", "patternProperties", "$defs")
        else _reshape(value, defs, inlining)
        for key, value in node.items()
    }
    alternatives = out.get("anyOf")
    if isinstance(alternatives, list) and len(alternatives) == 2 and NULL in alternatives:
        (other,) = [alternative for alternative in alternatives if alternative != NULL]
        nullable = _or_null(other)
        if nullable is not None:
            del out["anyOf"]
            # The field's own title and description win over the alternative's (a model's title and docstring).
            out = {**nullable, **out}
    return out


def _or_null(schema: dict[str, Any]) -> dict[str, Any] | None:
    """`schema` widened to accept null as well, when it can be said in one schema (else None)."""
    keywords = set(schema) - ANNOTATIONS
    if not isinstance(schema.get("type"), str) or not keywords <= {"type", "enum", "const", *TYPE_BOUND}:
        return None
    if {"enum", "const"} <= keywords:
        return None
    widened = {**schema, "type": [schema["type"], "null"]}
    if "const" in widened:
        widened["enum"] = [widened.pop("const"), None]
    elif "enum" in widened:
        widened["enum"] = [*widened["enum"], None]
    return widened
