"""Saving what a compaction reduced, before the reduced request leaves: nothing is lost.

Every newly reduced original is saved (redacted, 0600) and its note then names it by its output
id, `<capability>/<tool_use_id>`: in the gateway as the HTTP route that serves it, and always as
the `factrail outputs get` command; never as a path on the server. The full arguments of a newly
briefed call are saved beside it. A result whose original cannot be saved (an I/O error, a
read-only or full volume, the byte quota, no secret) is sent whole, as it came: nothing is
lost, and no note ever points at a copy that is not there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from factrail.core.marks import is_compacted, saved_output_phrase, swap_full_output_note
from factrail.core.model import Message, input_json
from factrail.stores.outputs import OutputStore, QuotaExceeded
from factrail.stores.paths import sanitise_name

log = logging.getLogger("factrail.session")


@dataclass(slots=True)
class Saved:
    """The texts whose notes now say where the whole is (or that went back to their original),
    how many outputs were saved, and the redactions made on the way, by family."""

    texts: dict[str, str] = field(default_factory=dict)
    count: int = 0
    redactions: dict[str, int] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)
    """The output id of each saved original (`factrail outputs get ID`)."""
    failures: dict[str, int] = field(default_factory=dict)
    """Originals that could not be saved, by reason: `quota` (the byte quota refused them) or
    `error` (the disk or the secret failed); they are sent whole."""
    inputs: dict[str, str] = field(default_factory=dict)
    """The output id of each briefed call's saved whole arguments (`<tool_use_id>.input`)."""


class OutputWriter:
    """Writes a compaction's originals to the saved-output store."""

    def __init__(self, outputs: OutputStore, route: str | None) -> None:
        """`route`: the HTTP route the notes name (None: the `factrail outputs get` command
        alone)."""
        self.outputs = outputs
        self.route = route

    def phrase(self, session: str) -> Callable[[str], str] | None:
        """The full-output phrase of each call's note once its original is saved in this
        session (None: the session's capability cannot be had, so nothing will be saved)."""
        try:
            capability = self.outputs.capability(session)
        except OSError:
            return None
        return self._phrase(capability)

    def _phrase(self, capability: str) -> Callable[[str], str]:
        """The full-output phrase naming each call's saved original under `capability`."""
        return lambda tool_use_id: saved_output_phrase(
            f"{capability}/{sanitise_name(tool_use_id)}", self.route
        )

    def save_outputs(
        self,
        session: str,
        changed: Mapping[str, str],
        originals: Mapping[str, str],
        messages: Sequence[Message],
    ) -> Saved:
        """Save every newly reduced original and swap its note in `messages` for one naming
        the file. A result whose note, once it names the file, would be no shorter than the
        original keeps its original text: a reduction never lengthens a result."""
        saved = Saved()
        notes: dict[str, str] = {}
        try:
            capability = self.outputs.capability(session)
        except OSError as err:
            log.warning("could not derive the session's output capability (%s)", err)
            pending = [i for i, o in originals.items() if i in changed and not is_compacted(o)]
            if pending:
                saved.failures["error"] = len(pending)
                saved.texts.update((i, originals[i]) for i in pending)
                _swap(messages, saved.texts)
            return saved
        phrase = self._phrase(capability)
        for tool_use_id, text in changed.items():
            original = originals.get(tool_use_id)
            if original is None or is_compacted(original):
                continue
            note = swap_full_output_note(text, tool_use_id, phrase(tool_use_id))
            if len(note) >= len(original):
                saved.texts[tool_use_id] = original
            else:
                notes[tool_use_id] = note
        written = self.outputs.save_all(session, [(i, originals[i]) for i in notes])
        for tool_use_id, got in written.items():
            if isinstance(got, OSError):
                reason = "quota" if isinstance(got, QuotaExceeded) else "error"
                saved.failures[reason] = saved.failures.get(reason, 0) + 1
                log.warning("could not save an output (%s); it is sent whole", got)
                saved.texts[tool_use_id] = originals[tool_use_id]
                continue
            saved.texts[tool_use_id] = notes[tool_use_id]
            saved.where[tool_use_id] = got.output_id
            saved.count += 1
            for family, n in got.redactions.items():
                saved.redactions[family] = saved.redactions.get(family, 0) + n
        _swap(messages, saved.texts)
        return saved

    def save_inputs(
        self,
        session: str,
        fresh: Mapping[str, dict[str, Any]],
        originals: Sequence[Message],
        messages: Sequence[Message],
        saved: Saved,
    ) -> set[str]:
        """Save the whole arguments of every call briefed for the first time, as
        `<tool_use_id>.input` beside the saved outputs (`saved.inputs`). A call whose arguments
        could not be saved goes with them whole (put back in `messages`); returns those."""
        whole = {u.tool_use_id: u for m in originals for u in m.tool_uses if u.tool_use_id in fresh}
        written = self.outputs.save_all(
            session, [(f"{i}.input", input_json(u)) for i, u in whole.items()]
        )
        unsaved: set[str] = set()
        for tool_use_id in whole:
            got = written[f"{tool_use_id}.input"]
            if isinstance(got, OSError):
                reason = "quota" if isinstance(got, QuotaExceeded) else "error"
                saved.failures[reason] = saved.failures.get(reason, 0) + 1
                log.warning("could not save a call's arguments (%s); they are sent whole", got)
                unsaved.add(tool_use_id)
            else:
                saved.inputs[tool_use_id] = got.output_id
        for m in messages:
            for u in m.tool_uses:
                if u.tool_use_id in unsaved:
                    u.input = whole[u.tool_use_id].input
        return unsaved

    def expire(self, now: float) -> None:
        """Expire and bound the saved outputs at most once a day (the gateway also sweeps on a
        timer; this keeps `factrail compact` and library users bounded)."""
        try:
            self.outputs.maybe_sweep(now)
        except OSError as err:
            log.warning("could not sweep expired outputs (%s)", err)


def _swap(messages: Sequence[Message], texts: Mapping[str, str]) -> None:
    if not texts:
        return
    for m in messages:
        for r in m.tool_results:
            if r.tool_use_id in texts:
                r.text = texts[r.tool_use_id]
        for u in m.tool_uses:
            if u.tool_use_id in texts and u.text is not None:
                u.text = texts[u.tool_use_id]
