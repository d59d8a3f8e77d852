"""The per-request compaction step: re-apply, count, fence, judge, apply the rails, save, persist.

`step` reads top to bottom; the taint fence's scan (`fencing`), the cost gate (`gate`: when a
due turn compacts, how deep), the analysis cache (`analyses`), the judge round (`judging`) and
output writing (`saving`) are its parts; `turn` is the transcript they share; `options` is its
section of the settings.
"""

from factrail.session.keys import session_key
from factrail.session.options import EngineOptions
from factrail.session.result import TurnResult
from factrail.session.step import SessionCompactor
from factrail.session.turn import Turn

__all__ = ["EngineOptions", "SessionCompactor", "Turn", "TurnResult", "session_key"]
