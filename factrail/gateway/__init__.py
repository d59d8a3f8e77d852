"""The FastAPI gateway: the app factory, the routes, the upstream client and the metrics."""

from factrail.gateway.factory import create_app

__all__ = ["create_app"]
