"""The reviewers' inbox: one web page, served with its assets from the package (no CDN), that talks to the API.

The page is a shell and a script (``inbox_assets/``): it signs in with a token kept for the browser tab only
(``sessionStorage``), or on the device (``localStorage``) when the reviewer asks; reads the queue from
``GET /v1/approvals``, follows the tenant stream for what arrives and what goes, and decides through
``POST /v1/runs/{id}/approvals`` like any other client. A card of a run on a thread links to the thread's
conversation (``/inbox/threads/{id}``), which follows the thread's stream. The server renders nothing of the
tenant's data here, so these routes need no token; every byte of data is fetched with the bearer token, and scoped
by the API. ``/`` leads here.

The page may not be framed (a decision button under someone else's page is a click away from a decision), runs no
inline script, and talks to this origin only.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from flask import Blueprint, Flask, Response, redirect, request, send_from_directory
from werkzeug.wrappers import Response as WerkzeugResponse

ASSETS = Path(__file__).with_name("inbox_assets")
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

PREFIX = "/inbox"

blp = Blueprint("inbox", __name__, url_prefix=PREFIX)


def register(app: Flask) -> None:
    """Serve the inbox, every one of its responses carrying :data:`SECURITY_HEADERS`.

    The hook is the app's, not the blueprint's: a 404 (``/inbox/nope``), a 405 (``POST /inbox``) or a 500 under
    ``/inbox`` is answered by the app's error handlers before any blueprint is chosen, and a blueprint's hooks
    would never see it. An error page left unprotected can still be framed or sniffed.
    """
    app.register_blueprint(blp)
    app.add_url_rule("/", "root", _to_inbox, methods=["GET"])
    app.after_request(_secure)


def _to_inbox() -> WerkzeugResponse:
    """``/`` is where a person opening the server's address lands: the inbox, not a JSON 404."""
    return redirect(PREFIX, code=302)


def _secure(response: Response) -> Response:
    if request.path == PREFIX or request.path.startswith(PREFIX + "/"):
        response.headers.update(SECURITY_HEADERS)
    return response


@blp.route("", methods=["GET"])
@blp.route("/", methods=["GET"])
def queue() -> Response:
    """The live queue of pending approvals."""
    return _page()


@blp.route("/approvals/<uuid:approval_id>", methods=["GET"])
def approval(approval_id: uuid.UUID) -> Response:
    """One approval (the page reads its id from the address)."""
    return _page()


@blp.route("/runs", methods=["GET"])
def runs() -> Response:
    """The runs the token may see, newest first."""
    return _page()


@blp.route("/runs/<uuid:run_id>", methods=["GET"])
def run(run_id: uuid.UUID) -> Response:
    """A run's messages and events, live."""
    return _page()


@blp.route("/threads/<uuid:thread_id>", methods=["GET"])
def thread(thread_id: uuid.UUID) -> Response:
    """A thread's conversation across its runs, live."""
    return _page()


@blp.route("/assets/<any('inbox.js', 'inbox.css'):name>", methods=["GET"])
def asset(name: str) -> Response:
    """The page's script and style sheet."""
    return send_from_directory(ASSETS, name, max_age=300)


def _page() -> Response:
    response = send_from_directory(ASSETS, "inbox.html", max_age=0)
    response.headers["Cache-Control"] = "no-store"
    return response
