"""factrail gateway: the FastAPI app that compacts OpenAI-compatible requests in flight."""
