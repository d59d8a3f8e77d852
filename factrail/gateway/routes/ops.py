"""Operations routes: health, readiness, metrics, saved outputs and session reports."""

from __future__ import annotations

from functools import partial
from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, PlainTextResponse, Response

from factrail.gateway.errors import openai_error
from factrail.gateway.metrics import CONTENT_TYPE
from factrail.gateway.proxy import Gateway
from factrail.gateway.routes.admin import admin_denied
from factrail.policy.trigger import Trigger, soft_line
from factrail.session.inspect import recent_bills, recent_report, report
from factrail.stores.outputs import OutputStore, parse_output_id
from factrail.stores.state import SessionState, StateStore

router = APIRouter()


@router.get("/healthz")
async def healthz() -> Response:
    """The process is up."""
    return JSONResponse({"status": "ok"})


@router.get("/readyz")
async def readyz(request: Request) -> Response:
    """Ready (200) while requests can be forwarded: the upstream client is open. A failing
    state store or an outputs folder that cannot be written leaves the gateway serving (it
    fails open: compaction goes on by the rules, the fence treats sessions as unproven, a
    result whose output cannot be saved is not reduced) and is reported as `degraded`, so a
    store outage never takes every replica out of its load balancer."""
    gateway: Gateway = request.app.state.gateway
    state: StateStore | None = request.app.state.state_store
    outputs: OutputStore | None = request.app.state.outputs
    checks = {
        "upstream": not gateway.client.is_closed,
        "state": state is None or await run_in_threadpool(state.ping),
        "outputs": outputs is None or await run_in_threadpool(outputs.writable),
    }
    ready = checks["upstream"]
    status = ("ready" if all(checks.values()) else "degraded") if ready else "unready"
    return JSONResponse({"status": status, "checks": checks}, status_code=200 if ready else 503)


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    """Prometheus text exposition."""
    gateway: Gateway = request.app.state.gateway
    return Response(gateway.metrics.render(), media_type=CONTENT_TYPE)


@router.get("/v1/factrail/outputs/{output_id:path}")
async def saved_output(request: Request, output_id: str) -> Response:
    """A saved full output as text, by `<capability>/<tool_use_id>`: the capability is all it
    takes, and only a session's own notes name it (no listing or report does), so an agent reads
    its outputs back through its own session. Ids of the older layout (folders named by the
    session key) are not served here."""
    if parse_output_id(output_id) is None:
        return openai_error(400, "malformed output id", code="invalid_output_id")
    outputs: OutputStore | None = request.app.state.outputs
    text = (
        None
        if outputs is None
        else await run_in_threadpool(partial(outputs.get, output_id, capability_only=True))
    )
    if text is None:
        return openai_error(404, "no saved output with this id", code="output_not_found")
    return PlainTextResponse(text)


DEFAULT_SESSIONS = 50
MAX_SESSIONS = 1000


@router.get("/v1/factrail/sessions")
async def recent_sessions(request: Request) -> Response:
    """Of the most recently updated records (`?limit=`, 50 by default, at most 1000), the
    sessions (`recent_bills`), each with its bill against sending it whole, and all of them
    together, by tool ids and figures, never a capability; needs the admin key."""
    denied = admin_denied(request)
    if denied is not None:
        return denied
    raw = request.query_params.get("limit", str(DEFAULT_SESSIONS))
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_SESSIONS:
        return openai_error(
            400, f"limit must be a whole number from 1 to {MAX_SESSIONS}", code="invalid_limit"
        )
    state: StateStore | None = request.app.state.state_store
    gateway: Gateway = request.app.state.gateway
    return JSONResponse(await run_in_threadpool(sessions_report, gateway, state, int(raw)))


def sessions_report(gateway: Gateway, state: StateStore | None, limit: int) -> dict[str, Any]:
    """The `limit` most recent sessions with the deployment's summary and mode: the sessions
    route's JSON, which the sessions page shows."""
    rows = [] if state is None else recent_bills(state, limit, live_s=gateway.settings.cache_ttl_s)
    return {"mode": gateway.settings.mode, **recent_report(rows)}


@router.get("/v1/factrail/sessions/{session}")
async def inspect_session(request: Request, session: str) -> Response:
    """What the session's last compactions did (`factrail inspect --json`: tool ids, sizes and
    notes, never a capability); needs the admin key."""
    denied = admin_denied(request)
    if denied is not None:
        return denied
    gateway: Gateway = request.app.state.gateway
    state: StateStore | None = request.app.state.state_store
    data = (
        None if state is None else await run_in_threadpool(session_report, gateway, state, session)
    )
    if data is None:
        return openai_error(404, "no such session", code="session_not_found")
    return JSONResponse(data)


def session_report(gateway: Gateway, state: StateStore, session: str) -> dict[str, Any] | None:
    """`report` of a stored session with its turn log and its model's lines (None: no such
    session); the session route's JSON, which the session page shows."""
    loaded = state.load(session)
    return None if loaded is None else loaded_report(gateway, state, session, loaded)


def loaded_report(
    gateway: Gateway, state: StateStore, session: str, loaded: SessionState
) -> dict[str, Any]:
    """`session_report` of a session already loaded from `state`."""
    return report(session, loaded, state.turns(session), partial(model_lines, gateway.trigger))


def model_lines(trigger: Trigger, model: str) -> dict[str, int | None]:
    """A model's soft line, trigger, danger line and context window (tokens; the window None
    when the table does not know it)."""
    at = trigger.for_model(model)
    return {
        "soft": round(soft_line(at)),
        "trigger": at,
        "danger": trigger.danger(model, at),
        "window": trigger.window_for(model),
    }
