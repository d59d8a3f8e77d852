"""`python -m factrail` runs the CLI."""

from factrail.cli import main

raise SystemExit(main())
