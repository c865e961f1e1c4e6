"""Model providers: one module each, behind the protocol in :mod:`agentstack_lab.providers.base`."""
