"""`python -m contextembed` runs the `contextembed` command."""

from contextembed.cli import main

raise SystemExit(main())
