"""``python -m gpuarch`` runs the command line."""

from gpuarch.cli.main import main

raise SystemExit(main())
