"""The Anthropic surface: `/v1/messages` compacted in flight, the rest of `/v1/messages/*`
(`count_tokens`, batches) passed through to the Anthropic upstream."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.proxy import ANTHROPIC_PASSTHROUGH, MESSAGES, Gateway
from app.routes import PASSTHROUGH_METHODS

router = APIRouter()


def _gateway(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


@router.post("/v1/messages")
async def messages(request: Request) -> Response:
    """Messages API, compacted in flight."""
    return await _gateway(request).handle(request, MESSAGES)


@router.api_route("/v1/messages/{path:path}", methods=PASSTHROUGH_METHODS)
async def messages_passthrough(request: Request, path: str) -> Response:
    """`count_tokens`, message batches and the rest under `/v1/messages/`, forwarded as is."""
    return await _gateway(request).handle(request, ANTHROPIC_PASSTHROUGH)
