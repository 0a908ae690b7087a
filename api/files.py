"""An agent's persistent files: ``/v1/agents/{id}/files``."""

from __future__ import annotations

import uuid
from typing import Any

import marshmallow as ma
from marshmallow import fields, validate

from hango.api import examples
from hango.api.audit import audit_target, audited
from hango.api.context import principal, services
from hango.api.parsing import Blueprint
from hango.api.schemas import ListArgs, cursor_field, list_of, page_request, refusal
from hango.kernel.models import File
from hango.services import files

blp = Blueprint("files", __name__, url_prefix="/v1", description="An agent's /memories/ and /skills/ files")


class FileArgs(ListArgs):
    cursor = cursor_field(str)  # files are ordered by path
    prefix = fields.String(
        load_default=None,
        validate=[validate.Length(min=1, max=1000), validate.Regexp("^/", error="must be an absolute path")],
        metadata={"description": "an absolute path, e.g. /memories/ (`.` and `..` resolved; it may not climb above /)"},
    )


class FileInfo(ma.Schema):
    path = fields.String(required=True, metadata={"description": "the file's absolute path, e.g. /memories/AGENTS.md"})
    size = fields.Function(
        files.size_of, required=True, metadata={"description": "the content's size in bytes, encoded as UTF-8"}
    )
    updated_at = fields.DateTime(required=True, metadata={"description": "when the file was last written"})


class FileContent(ma.Schema):
    path = fields.String(required=True, metadata={"description": "the file's absolute path, normalised"})
    content = fields.String(required=True, metadata={"description": "the whole file, as text"})
    updated_at = fields.DateTime(required=True, metadata={"description": "when the file was last written"})


class FileWrite(ma.Schema):
    content = fields.String(
        required=True,
        validate=validate.Length(max=10_000_000),
        metadata={
            "description": "the file's new content, whole, at most 10,000,000 characters (and the body at most "
            "HANGO_MAX_BODY_BYTES); no NUL character"
        },
    )


FileList = list_of(FileInfo, "FileList")


@blp.route("/agents/<uuid:agent_id>/files", methods=["GET"])
@blp.problems(404)
@blp.arguments(FileArgs, location="query")
@blp.response(200, FileList, example=examples.FILES)
def list_files(args: dict[str, Any], agent_id: uuid.UUID) -> Any:
    """The agent's files, by path (everyone in the tenant).

    The files the agent keeps across runs, under /memories/ and /skills/, in path order, without their content.
    ?prefix= keeps those under a path (normalised first; one climbing above / is a 400). An agent outside the tenant
    is a 404.
    """
    return files.list_files(services().db, principal(), agent_id, args["prefix"], page_request(args))


@blp.route("/agents/<uuid:agent_id>/files/<path:path>", methods=["GET"])
@blp.problems(404)
@blp.response(200, FileContent, example=examples.FILE)
def read_file(agent_id: uuid.UUID, path: str) -> File:
    """One file (``/memories/AGENTS.md`` is ``files/memories/AGENTS.md``).

    Its whole content. Everyone in the tenant may read it. A file that does not exist, a path outside /memories/
    and /skills/, or an agent outside the tenant is a 404.
    """
    return files.read_file(services().db, principal(), agent_id, path)


@blp.route("/agents/<uuid:agent_id>/files/<path:path>", methods=["PUT"])
@blp.problems(403, 404)
@blp.arguments(FileWrite, example=examples.FILE_WRITE)
@blp.response(200, FileContent, example=examples.FILE)
@audited("file.write", "file")
def write_file(body: dict[str, Any], agent_id: uuid.UUID, path: str) -> File:
    """Create or replace a file (owner, admin).

    Writes the whole content at the path, normalised (`.` and `..` resolved). Only paths under /memories/ and
    /skills/ are served (any other is a 404, as is an agent outside the tenant); a member gets a 403. The agent's
    runs read the new content from then on. Audited as file.write.
    """
    audit_target("file", f"{agent_id}:/{path}")
    return files.write_file(services().db, principal(), agent_id, path, body["content"])


@blp.route("/agents/<uuid:agent_id>/files/<path:path>", methods=["DELETE"])
@blp.problems(403, 404)
@blp.response(204)
@blp.doc(
    responses={
        "404": refusal(404, examples.problem(404, "not-found", "Not found", "file /memories/old-notes.md not found"))
    }
)
@audited("file.delete", "file")
def delete_file(agent_id: uuid.UUID, path: str) -> None:
    """Delete a file (owner, admin).

    A member gets a 403; a file that does not exist, a path outside /memories/ and /skills/, or an agent outside the
    tenant is a 404. Audited as file.delete.
    """
    audit_target("file", f"{agent_id}:/{path}")
    files.delete_file(services().db, principal(), agent_id, path)
