"""Rebalances made visible: the deterministic simulator, scenario files and the renderer.

These drive the sans-IO group core in `kctl.group` (the same state machines and assignors the
workers run) but read files and render with rich, which the core itself may not.
"""
