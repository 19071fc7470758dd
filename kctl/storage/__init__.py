"""kctl.storage."""
