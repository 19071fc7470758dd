"""kctl.connectors."""
