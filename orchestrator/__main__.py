"""`python -m orchestrator` runs the specdeploy CLI."""

from orchestrator.cli import main

main()
