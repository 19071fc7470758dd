"""kctl.rest."""
