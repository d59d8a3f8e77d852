"""The OpenAI-compatible surface: compaction routes and a pass-through for the rest of `/v1/`.

The Anthropic routes (`/v1/messages*`) are included first, so the catch-all never takes them.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.proxy import CHAT, PASSTHROUGH, RESPONSES, Gateway
from app.routes import PASSTHROUGH_METHODS, anthropic

router = APIRouter()
router.include_router(anthropic.router)


def _gateway(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


@router.post("/v1/chat/completions")
async def chat_completions(request: Request) -> Response:
    """Chat completions, compacted in flight."""
    return await _gateway(request).handle(request, CHAT)


@router.post("/v1/responses")
async def responses(request: Request) -> Response:
    """Responses API, compacted in flight."""
    return await _gateway(request).handle(request, RESPONSES)


@router.api_route("/v1/{path:path}", methods=PASSTHROUGH_METHODS)
async def passthrough(request: Request, path: str) -> Response:
    """Everything else under `/v1/`, forwarded as is."""
    return await _gateway(request).handle(request, PASSTHROUGH)
