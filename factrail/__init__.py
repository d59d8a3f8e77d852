"""factrail: keep a long-running coding agent inside its context window without losing facts.

The engine a library user needs: `compact_transcript` (one transcript, as the gateway would
compact it), `evaluate` (replay transcripts offline and count the facts kept) and `Settings`
(every knob, read from `FACTRAIL_*` and an optional TOML file). The gateway lives in
`factrail.gateway` (`create_app`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Compaction", "Settings", "__version__", "compact_transcript", "evaluate"]

if TYPE_CHECKING:
    from factrail.api import Compaction, compact_transcript
    from factrail.eval.command import evaluate
    from factrail.settings import Settings

_LAZY = {
    "Compaction": "factrail.api",
    "compact_transcript": "factrail.api",
    "evaluate": "factrail.eval.command",
    "Settings": "factrail.settings",
}


def __getattr__(name: str) -> Any:
    """Import the public API on first use, so `import factrail` stays light."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'factrail' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
