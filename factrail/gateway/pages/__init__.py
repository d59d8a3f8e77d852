"""The pages the gateway serves under `/factrail/`: server-rendered HTML over the same data as
the JSON routes, with one stylesheet and one small script of its own and nothing from outside."""

from factrail.gateway.pages.routes import router

__all__ = ["router"]
