"""Testing connectors: run one on the real runtime in-process, with a clock the test moves.

    from kctl.testing import ConnectorHarness, assert_delivered

    with ConnectorHarness(MySourceConnector, {"topic": "out"}) as h:
        h.start()
        h.run_until(lambda: len(h.written("out")) >= 10)
        h.commit()
        h.restart_tasks(crash=True)

docs/developer-guide.md shows it at work.
"""

from kctl.testing.harness import (
    ConnectorHarness,
    Delivery,
    ManualClock,
    Written,
    assert_delivered,
    delivery,
)

__all__ = ["ConnectorHarness", "Delivery", "ManualClock", "Written", "assert_delivered",
           "delivery"]
