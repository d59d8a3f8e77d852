"""The deployable ASGI module: `uvicorn app.main:app` serves the gateway built from the
environment's settings (`factrail serve` does the same with its own checks and logging)."""

from factrail.gateway import create_app

app = create_app()
