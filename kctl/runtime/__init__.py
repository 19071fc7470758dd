"""kctl.runtime."""
