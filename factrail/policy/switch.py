"""The per-session on/off switch (`/factrail on|off|status`)."""

from __future__ import annotations

from typing import Any, Literal

SwitchCommand = Literal["on", "off", "status", "help"]
_COMMANDS: dict[str, SwitchCommand] = {
    **dict.fromkeys(("on", "enable", "1", "true"), "on"),
    **dict.fromkeys(("off", "disable", "0", "false"), "off"),
    **dict.fromkeys(("", "status"), "status"),
}
_OFF_WORDS = frozenset({"0", "false", "off", "no"})


def resolve_enabled(store: Any, option: Any) -> bool:
    """A bool in the session store wins; then a bool option; a string option is off only when it
    is `0|false|off|no` (lower-cased, untrimmed). Anything else means on."""
    if isinstance(store, bool):
        return store
    if isinstance(option, bool):
        return option
    if isinstance(option, str):
        return option.lower() not in _OFF_WORDS
    return True


def parse_switch(argument: str) -> SwitchCommand:
    """The command named by `/factrail <argument>`; unknown words ask for help."""
    return _COMMANDS.get(argument.strip().lower(), "help")
