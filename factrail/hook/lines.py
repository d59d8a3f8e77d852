"""The trigger of a Claude Code session, from the plugin's options and the window Claude Code
reports: T = min(compactAtPercent × window, compactAtTokens), with the soft line, the re-arm
gap and the danger line of `factrail.policy.trigger` (the gateway's own arithmetic)."""

from __future__ import annotations

from dataclasses import dataclass

from factrail.hook.options import HookOptions
from factrail.policy.trigger import Trigger

MODEL = ""
"""The key of the window Claude Code reports: a prefix of every model name, so it is the window
whatever the session's model (which only prices the compaction)."""


@dataclass(frozen=True, slots=True)
class SessionTrigger:
    """A session's trigger section and its T (0: never)."""

    trigger: Trigger
    tokens: int

    def danger(self) -> int:
        """Past this a compaction runs whatever it costs (the gateway's `_must`)."""
        return self.trigger.danger(MODEL, self.tokens)


def session_trigger(options: HookOptions, window: float | None) -> SessionTrigger:
    """The trigger for a session whose model has `window` tokens (None: unknown)."""
    windows = {MODEL: int(window)} if window is not None and window > 0 else {}
    trigger = Trigger(
        tokens=max(options.compact_at_tokens, 0),
        percent=max(options.compact_at_percent, 0.0),
        rearm=options.settings.rearm_tokens,
        windows=windows,
    )
    return SessionTrigger(trigger, trigger.for_model(MODEL))
