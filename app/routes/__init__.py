"""HTTP routes: thin handlers over the gateway (`app.proxy`) and the stores."""

PASSTHROUGH_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
"""Methods the pass-through routes accept."""
