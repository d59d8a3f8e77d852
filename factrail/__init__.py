"""factrail: keep a long-running coding agent inside its context window without losing facts."""

__version__ = "0.1.0"
