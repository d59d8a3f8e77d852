"""The proxied surface as a pure ASGI layer in front of FastAPI's routes.

Compaction routes: `POST /v1/chat/completions`, `/v1/responses` and (Anthropic) `/v1/messages`.
Everything else under `/v1/messages/` passes through to the Anthropic upstream and the rest of
`/v1/` to the OpenAI one, except everything under `/v1/factrail` (factrail's own operations routes,
for every method and however spelled: never forwarded, so an admin bearer never leaves). On a small
request FastAPI's routing, dependency solving and exception middlewares cost more than the proxying
itself, so these requests never enter them; the operations routes stay in FastAPI.
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Receive, Scope, Send

from factrail.gateway.errors import openai_error
from factrail.gateway.proxy import Gateway
from factrail.gateway.routing import (
    ANTHROPIC_PASSTHROUGH,
    CHAT,
    MESSAGES,
    PASSTHROUGH,
    RESPONSES,
    Route,
)

PASSTHROUGH_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
"""Methods the pass-through routes accept; others under `/v1/` are answered 405."""
COMPACTION_ROUTES = {
    "/v1/chat/completions": CHAT,
    "/v1/responses": RESPONSES,
    "/v1/messages": MESSAGES,
}
"""Exact path → route, for `POST` (other methods on these paths pass through)."""
OWN_PREFIX = "/v1/factrail"
"""factrail's own routes: answered here or 404/405, never forwarded upstream."""
_SLASHES = re.compile(r"/{2,}")


class Reserved(Exception):
    """A path under `/v1/factrail` spelled otherwise than the operations routes are (another
    case, doubled slashes): answered 404 here, never forwarded."""


def is_reserved(path: str) -> bool:
    """Whether a (decoded) path lies under `/v1/factrail`, in any case, slashes collapsed."""
    folded = _SLASHES.sub("/", path).lower()
    return folded == OWN_PREFIX or folded.startswith(OWN_PREFIX + "/")


def route_for(method: str, path: str) -> Route | None:
    """The proxied route of a request; None outside `/v1` and for the operations routes.

    Raises `Reserved` for a path under `/v1/factrail` the operations routes would not match as
    spelled, `LookupError` for a method the pass-through does not accept.
    """
    if method == "POST" and path in COMPACTION_ROUTES:
        return COMPACTION_ROUTES[path]
    if is_reserved(path):
        if path.startswith(OWN_PREFIX) and "//" not in path:
            return None
        raise Reserved(path)
    if not (path.startswith("/v1/") or path == "/v1"):
        return None
    if method not in PASSTHROUGH_METHODS:
        raise LookupError(method)
    return ANTHROPIC_PASSTHROUGH if path.startswith("/v1/messages/") else PASSTHROUGH


class ProxiedRoutes:
    """ASGI middleware: answers the proxied routes through the gateway, passes the rest on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Dispatch one ASGI call."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            route = route_for(scope["method"], scope["path"])
        except Reserved:
            answer = openai_error(404, "no such factrail route", code="not_found")
            await answer(scope, receive, send)
            return
        except LookupError:
            allow = {"allow": ", ".join(sorted(PASSTHROUGH_METHODS))}
            answer = openai_error(
                405, "method not allowed", code="method_not_allowed", headers=allow
            )
            await answer(scope, receive, send)
            return
        if route is None:
            await self.app(scope, receive, send)
            return
        gateway: Gateway = scope["app"].state.gateway
        await gateway.serve(scope, receive, send, route)
