"""The one exponential backoff of kctl's retry loops (the CLI's wait through a rebalance,
the herder's join retry, the error-tolerance operator's retries, the schema registry's
start, the file source's unreadable files; connectors import it from `kctl.api`): each
loop counts its attempts and asks for the delay, so the arithmetic and its cap live here
once."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Backoff"]


@dataclass(frozen=True)
class Backoff:
    """Delays that grow by `factor` from `first` and stop growing at `cap`."""

    first: float
    cap: float
    factor: float = 2.0

    def delay(self, attempt: int) -> float:
        """The wait before retry `attempt` (1 is the first retry)."""
        try:
            grown = self.first * self.factor ** max(attempt - 1, 0)
        except OverflowError:  # a loop that retries for ever: long past the cap
            return float(self.cap)
        return float(min(grown, self.cap))
