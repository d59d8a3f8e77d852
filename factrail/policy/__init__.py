"""Pure estate policy: the trigger and its lines, the taint fence and the judge choice.
No I/O and no clock (`now` is a parameter)."""
