"""HTTP routes: thin handlers over the gateway (`app.proxy`) and the stores."""
