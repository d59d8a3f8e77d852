"""The deployable ASGI module of the gateway (`app.main:app`); not part of the package."""
