"""kctl.cli."""
