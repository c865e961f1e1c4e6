"""``python -m agentstack_lab.cli`` runs the ``agentstack-lab`` command."""

from agentstack_lab.cli import main

main()
