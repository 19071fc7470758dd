"""kctl.group."""
