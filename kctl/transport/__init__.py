"""kctl.transport."""
