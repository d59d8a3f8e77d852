"""Templates, the figures' formats and the headers every page carries.

Pages are rendered from the package's `templates/` with autoescaping on; the stylesheet and the
script are the only other files served (`static`), so the Content-Security-Policy forbids
everything else: no inline script or style, nothing from another origin."""

from __future__ import annotations

import time
from importlib import resources
from typing import Any

import orjson
from jinja2 import Environment, PackageLoader, Undefined, select_autoescape
from starlette.responses import HTMLResponse, Response

from factrail import __version__

CSP = (
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:;"
    " connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
PAGE_HEADERS = {
    "content-security-policy": CSP,
    "cache-control": "no-store",
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
}
"""On every page (and every answer of the login and the static routes)."""
STATIC_TYPES = {
    "pages.css": "text/css; charset=utf-8",
    "pages.js": "text/javascript; charset=utf-8",
}
"""The files `/factrail/static/` serves, and nothing else."""
STATIC_CACHE = "public, max-age=31536000, immutable"
"""The static files are addressed with the version (`?v=`), so a browser may keep them."""
DASH = "—"

_ENV = Environment(
    loader=PackageLoader("factrail.gateway.pages", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _missing(value: Any) -> bool:
    return value is None or isinstance(value, Undefined)


def number(value: Any, digits: int = 0) -> str:
    """A figure with thousands separators (`—` when absent)."""
    if _missing(value) or isinstance(value, bool) or not isinstance(value, int | float):
        return DASH
    return f"{value:,.{digits}f}".replace("-", "−")


def signed(value: Any) -> str:
    """A saving: `+1,234`, `−1,234` (`—` when absent)."""
    text = number(value)
    return text if text == DASH or value <= 0 else f"+{text}"


def ratio(value: Any) -> str:
    """A ratio to sending whole: `0.74×`."""
    return DASH if _missing(value) or isinstance(value, bool) else f"{value:.2f}×"


def tone(value: Any, *, ratio_of: bool = False) -> str:
    """`gain` for a saving (or a ratio under 1), `loss` for a loss, else nothing."""
    if _missing(value) or isinstance(value, bool) or not isinstance(value, int | float):
        return ""
    pivot = 1.0 if ratio_of else 0.0
    if value == pivot:
        return ""
    return "gain" if (value < pivot if ratio_of else value > pivot) else "loss"


def raw(value: Any) -> str:
    """A value as its JSON (what `data-value` holds for the browser tests)."""
    return "null" if isinstance(value, Undefined) else orjson.dumps(value).decode()


def utc(ms: Any) -> str:
    """A time in milliseconds as `YYYY-MM-DD HH:MM:SS UTC`."""
    if _missing(ms) or not isinstance(ms, int | float):
        return DASH
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def ago(ms: Any, now: float | None = None) -> str:
    """How long ago a time in milliseconds was: `12 s ago`, `5 min ago`, `3 h ago`, `2 d ago`."""
    if _missing(ms) or not isinstance(ms, int | float):
        return DASH
    seconds = max(0, int((time.time() if now is None else now) - ms / 1000))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"


def text(value: Any) -> str:
    """A text field, `—` when absent or empty."""
    return DASH if _missing(value) or value == "" else str(value)


_ENV.filters.update(
    number=number, signed=signed, ratio=ratio, tone=tone, raw=raw, utc=utc, ago=ago, text=text
)
_ENV.globals.update(version=__version__)


def page(template: str, context: dict[str, Any], status: int = 200) -> Response:
    """A page rendered from `template`, with `PAGE_HEADERS`."""
    html = _ENV.get_template(template).render(**context)
    return HTMLResponse(html, status_code=status, headers=PAGE_HEADERS)


def redirect(location: str, cookie: str | None = None) -> Response:
    """A 303 to `location` (one of the gateway's own paths), optionally setting a cookie."""
    response = Response(status_code=303, headers={**PAGE_HEADERS, "location": location})
    if cookie is not None:
        response.headers.append("set-cookie", cookie)
    return response


def _load_static() -> dict[str, bytes]:
    folder = resources.files("factrail.gateway.pages").joinpath("static")
    return {name: folder.joinpath(name).read_bytes() for name in STATIC_TYPES}


_STATIC = _load_static()


def static(name: str) -> Response | None:
    """A shipped static file by its name; None for any other name."""
    body = _STATIC.get(name)
    if body is None:
        return None
    headers = {**PAGE_HEADERS, "cache-control": STATIC_CACHE}
    return Response(body, media_type=STATIC_TYPES[name], headers=headers)
