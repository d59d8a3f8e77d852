"""The pages under `/factrail/`: the sessions list, a session's page, the login and the static
files. Each page wants the admin key as a bearer token or the sign-in cookie (`auth`); without
either it answers 401 with the login form, which returns to the page asked for."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from factrail.gateway.pages import auth, views
from factrail.gateway.pages.render import PAGE_HEADERS, page, redirect, static
from factrail.gateway.proxy import Gateway
from factrail.gateway.routes.admin import is_admin_key, page_admitted
from factrail.gateway.routes.ops import sessions_report

router = APIRouter(include_in_schema=False)

DEFAULT_SESSIONS = 50
MAX_SESSIONS = 1000
REFRESH_S = 10
"""How often the sessions list refreshes itself while it is open."""


def _common(request: Request) -> dict[str, Any]:
    gateway: Gateway = request.app.state.gateway
    return {"mode": gateway.settings.mode, "now": time.time(), "signed_in": True}


def login_form(next_path: str, *, status: int = 200, error: str | None = None) -> Response:
    """The login form, returning to `next_path` once signed in."""
    context = {"next": next_path, "error": error, "signed_in": False, "mode": None}
    return page("login.html", context, status)


def _refused(request: Request) -> Response:
    response = login_form(auth.requested(request), status=401)
    response.headers["www-authenticate"] = "Bearer"
    return response


@router.get("/factrail")
async def root() -> Response:
    """The pages live under `/factrail/`."""
    return redirect(auth.HOME)


@router.get("/factrail/")
async def sessions(request: Request) -> Response:
    """The most recent sessions (`?limit=`, as the JSON route) with the deployment's summary."""
    if not page_admitted(request):
        return _refused(request)
    gateway: Gateway = request.app.state.gateway
    raw = request.query_params.get("limit", "")
    limit = int(raw) if raw.isdigit() and 1 <= int(raw) <= MAX_SESSIONS else DEFAULT_SESSIONS
    read = partial(sessions_report, gateway, request.app.state.state_store, limit)
    data = await run_in_threadpool(read)
    context = {
        **_common(request),
        "mode": data.get("mode") or gateway.settings.mode,
        "data": data,
        "summary": data.get("summary") or {},
        "above": views.above_line(data.get("summary") or {}),
        "refresh": REFRESH_S,
        "mode_field": True,
    }
    return page("sessions.html", context)


@router.get("/factrail/sessions/{session}")
async def session_page(request: Request, session: str) -> Response:
    """One session: its tokens and cost turn by turn, and what each compaction did."""
    if not page_admitted(request):
        return _refused(request)
    state, outputs = request.app.state.state_store, request.app.state.outputs
    read = partial(views.session_view, request.app.state.gateway, state, outputs, session)
    view = await run_in_threadpool(read)
    if view is None:
        return page("missing.html", {**_common(request), "session": session}, 404)
    context = {**_common(request), "view": view, "data": view.data, "decisions": views.DECISIONS}
    return page("session.html", context)


@router.get("/factrail/login")
async def login(request: Request) -> Response:
    """With `?key=`: sign in and go to `next` (or say the key is wrong); without: the form."""
    next_path = auth.safe_next(request.query_params.get("next"))
    key = request.query_params.get("key")
    if key is None:
        return login_form(next_path)
    return _sign_in(request, key, next_path)


@router.post("/factrail/login")
async def login_posted(request: Request) -> Response:
    """The login form's answer (url-encoded `key` and `next`)."""
    fields = await auth.form_fields(request)
    if fields is None:
        return login_form(auth.HOME, status=400, error="The form could not be read.")
    return _sign_in(request, fields.get("key", ""), auth.safe_next(fields.get("next")))


def _sign_in(request: Request, key: str, next_path: str) -> Response:
    if not is_admin_key(request, key.strip()):
        return login_form(next_path, status=401, error="That is not the admin key.")
    gateway: Gateway = request.app.state.gateway
    return redirect(next_path, auth.sign_in_cookie(gateway.admin_key, request))


@router.post("/factrail/logout")
async def logout(request: Request) -> Response:
    """Remove the sign-in cookie and show the login form."""
    return redirect("/factrail/login", auth.sign_out_cookie(request))


@router.get("/factrail/static/{name}")
async def static_file(name: str) -> Response:
    """The stylesheet and the script (nothing else is served from here)."""
    found = static(name)
    if found is None:
        return Response("not found", 404, headers=PAGE_HEADERS, media_type="text/plain")
    return found


@router.get("/factrail/{rest:path}")
async def unknown(request: Request, rest: str) -> Response:
    """Any other path under `/factrail/`: the login form or a page saying there is none."""
    if not page_admitted(request):
        return _refused(request)
    return page("missing.html", {**_common(request), "session": None}, 404)
