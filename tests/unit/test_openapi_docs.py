"""The OpenAPI document is worth reading: every property, parameter and operation says what it is, every operation
shows an example, and every example is one its own schema accepts.

The app is built on settings naming a database and a Redis nobody listens on: building it and serving
``/openapi.json`` connect to neither.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from hango.api import create_app
from hango.kernel.config import Settings

JsonSchema = dict[str, Any]
METHODS = ("get", "put", "post", "delete", "patch")
# Keywords whose subschemas constrain the value the enclosing schema describes, rather than describe members of it.
BRANCHES = ("oneOf", "anyOf", "allOf")
CONDITIONS = ("if", "then", "else", "not")


@pytest.fixture(scope="module")
def document() -> JsonSchema:
    """``/openapi.json`` as the API serves it."""
    settings = Settings(
        database_url="postgresql://nobody@127.0.0.1:1/nothing",
        redis_url="redis://127.0.0.1:1/0",
        tool_modules=("tests.support.tools",),
    )
    response = create_app(settings).test_client().get("/openapi.json")
    assert response.status_code == 200
    served: JsonSchema = response.json
    return served


def operations(document: JsonSchema) -> Iterator[tuple[str, JsonSchema]]:
    """Each operation with its label, ``METHOD /path``."""
    for path, item in document["paths"].items():
        for method in METHODS:
            if method in item:
                yield f"{method.upper()} {path}", item[method]


def undescribed(schema: JsonSchema, where: str, described: frozenset[str] = frozenset()) -> Iterator[str]:
    """Where each member of ``schema`` (at any depth) has no description.

    A member is described by its own ``description``; a member that a ``oneOf``, ``anyOf``, ``allOf`` or condition
    branch only constrains further is described by the enclosing schema's member of that name.
    """
    members: dict[str, JsonSchema] = schema.get("properties", {})
    for name, member in members.items():
        if "description" not in member and name not in described:
            yield f"{where}.{name}"
        yield from undescribed(member, f"{where}.{name}")
    known = described | {name for name, member in members.items() if "description" in member}
    for keyword in BRANCHES:
        for index, branch in enumerate(schema.get(keyword, [])):
            yield from undescribed(branch, f"{where}/{keyword}[{index}]", known)
    for keyword in CONDITIONS:
        if isinstance(schema.get(keyword), dict):
            yield from undescribed(schema[keyword], f"{where}/{keyword}", known)
    for keyword, suffix in (("items", "[]"), ("additionalProperties", "{}"), ("propertyNames", "<key>")):
        if isinstance(schema.get(keyword), dict):
            yield from undescribed(schema[keyword], f"{where}{suffix}")


def inline_schemas(document: JsonSchema) -> Iterator[tuple[str, JsonSchema]]:
    """Every schema written inside an operation (not a reference to a component)."""
    for label, operation in operations(document):
        for parameter in operation.get("parameters", []):
            yield f"{label} {parameter['in']} {parameter['name']}", parameter["schema"]
        for media, content in operation.get("requestBody", {}).get("content", {}).items():
            yield f"{label} body {media}", content["schema"]
        for status, response in operation["responses"].items():
            for media, content in response.get("content", {}).items():
                yield f"{label} {status} {media}", content.get("schema", {})


def examples(content: JsonSchema) -> list[tuple[str, Any]]:
    """The examples of one media type: ``example`` or each of ``examples``."""
    found = [("example", content["example"])] if "example" in content else []
    return found + [(f"examples.{name}", entry["value"]) for name, entry in content.get("examples", {}).items()]


def test_every_property_of_every_schema_has_a_description(document: JsonSchema) -> None:
    missing = [spot for name, schema in document["components"]["schemas"].items() for spot in undescribed(schema, name)]
    missing += [spot for where, schema in inline_schemas(document) for spot in undescribed(schema, where)]
    assert not missing, f"{len(missing)} properties without a description:\n" + "\n".join(missing)


def test_every_parameter_has_a_description(document: JsonSchema) -> None:
    missing = [
        f"{path} {parameter['in']} {parameter['name']}"
        for path, item in document["paths"].items()
        for parameter in item.get("parameters", [])
        if not parameter.get("description")
    ]
    missing += [
        f"{label} {parameter['in']} {parameter['name']}"
        for label, operation in operations(document)
        for parameter in operation.get("parameters", [])
        if not parameter.get("description")
    ]
    assert not missing, f"{len(missing)} parameters without a description:\n" + "\n".join(missing)


def test_every_operation_has_a_summary_and_a_description(document: JsonSchema) -> None:
    missing = [
        label
        for label, operation in operations(document)
        if not operation.get("summary", "").strip() or not operation.get("description", "").strip()
    ]
    assert not missing, f"{len(missing)} operations without a description:\n" + "\n".join(missing)


def test_every_operation_has_an_example_of_its_body_and_of_a_response(document: JsonSchema) -> None:
    """Examples count where the operation itself states them: a response it shares by reference does not."""
    missing = []
    for label, operation in operations(document):
        bodies = operation.get("requestBody", {}).get("content", {}).values()
        if any(not examples(content) for content in bodies):
            missing.append(f"{label}: request body")
        answers = [
            content for response in operation["responses"].values() for content in response.get("content", {}).values()
        ]
        if not any(examples(content) for content in answers):
            missing.append(f"{label}: response")
    assert not missing, f"{len(missing)} operations without an example:\n" + "\n".join(missing)


def _date_time(value: object) -> bool:
    """RFC 3339 with a time zone, as the API writes its times (jsonschema checks it only with an extra package)."""
    if not isinstance(value, str):
        return True
    return datetime.fromisoformat(value.replace("Z", "+00:00")).tzinfo is not None


def _formats() -> FormatChecker:
    checker = FormatChecker()
    checker.checks("date-time", raises=ValueError)(_date_time)
    return checker


def located_examples(document: JsonSchema) -> Iterator[tuple[str, JsonSchema, Any]]:
    """Every example an operation states, with where it is and the schema it illustrates."""
    for label, operation in operations(document):
        for parameter in operation.get("parameters", []):
            for name, value in examples(parameter):
                yield f"{label} {parameter['name']} {name}", parameter["schema"], value
        contents = [("body", operation.get("requestBody", {}).get("content", {}))]
        contents += [(status, response.get("content", {})) for status, response in operation["responses"].items()]
        for where, content in contents:
            for media, entry in content.items():
                for name, value in examples(entry):
                    yield f"{label} {where} {media} {name}", entry.get("schema", {}), value


def test_every_example_is_valid_against_its_own_schema(document: JsonSchema) -> None:
    checker = _formats()
    found = list(located_examples(document))
    assert found
    wrong = []
    for where, schema, value in found:
        # The schema inside a copy of the document's components, so that its "#/components/..." references resolve.
        rooted = {"$schema": Draft202012Validator.META_SCHEMA["$id"], "components": document["components"], **schema}
        errors = sorted(Draft202012Validator(rooted, format_checker=checker).iter_errors(value), key=str)
        wrong += [f"{where}: {'/'.join(map(str, error.absolute_path))}: {error.message}" for error in errors]
    assert not wrong, f"{len(wrong)} examples break their schema:\n" + "\n".join(wrong)


def test_an_example_that_breaks_its_schema_is_caught(document: JsonSchema) -> None:
    """The check above rejects what it should: a run without its id, and a time without a zone."""
    schema = {"$ref": "#/components/schemas/Run"}
    rooted = {"components": document["components"], **schema}
    validator = Draft202012Validator(rooted, format_checker=_formats())
    run = {"agent_id": "6f1c2b7e-3d4a-4b8e-9c1d-2e3f4a5b6c7d", "state": "queued", "turn": 0}
    run |= {"created_by": "0d9e8f7a-6b5c-4d3e-8f2a-1b0c9d8e7f6a", "created_at": "2025-03-04T09:15:00"}
    messages = {error.message for error in validator.iter_errors(run)}
    assert "'id' is a required property" in messages
    assert any("date-time" in message for message in messages)
