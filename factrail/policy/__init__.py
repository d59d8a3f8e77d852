"""Pure estate policy: option coercion, the switch, the taint fence, judge choice, the token
trigger, cache-warm timing and compaction scope. No I/O and no clock (`now` is a parameter)."""
