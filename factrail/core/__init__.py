"""The pure compaction engine: no I/O, no clock, no network, no globals.

Nothing in this package imports anything of ours outside `factrail.core`.
"""
