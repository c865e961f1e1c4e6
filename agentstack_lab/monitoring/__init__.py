"""Monitoring services: health checks (and, with the coordination work, resources and metrics)."""
