"""HTTP routes: the proxied surface (pure ASGI, over `app.proxy`) and the operations routes."""
