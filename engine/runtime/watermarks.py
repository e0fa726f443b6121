"""Pipeline watermark: per source partition, minimum over active partitions.

A partition's watermark is the largest per-row watermark it has shown.  A
partition that shows no rows for its table's ``idle_micros`` stops holding
the pipeline back; a finished (bounded) source counts as +infinity.  The
pipeline watermark never decreases.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Before any data, nothing fires.
NO_WATERMARK = -(2**62)
#: After every source finished: every window fires.
END_OF_TIME = 2**62


@dataclass
class SourceClock:
    """Watermark state of one source table."""

    idle_micros: int
    partitions: dict[int, list[int]] = field(default_factory=dict)  # p -> [wm_us, seen_us]
    done: bool = False

    def current(self, now_us: int) -> int | None:
        """The source's watermark, or None if every partition is idle."""
        if self.done:
            return END_OF_TIME
        active = [wm for wm, seen in self.partitions.values()
                  if self.idle_micros <= 0 or now_us - seen < self.idle_micros]
        return min(active) if active else None


class WatermarkTracker:
    """Tracks every source's clock and the pipeline watermark across epochs."""

    def __init__(self, idle_micros: dict[str, int], stored: dict[str, Any] | None,
                 parallelism: int) -> None:
        stored = stored or {}
        self.value: int = stored.get("value", NO_WATERMARK)
        self.sources = {name: SourceClock(idle) for name, idle in idle_micros.items()}
        same_layout = stored.get("parallelism") == parallelism
        for name, saved in stored.get("sources", {}).items():
            clock = self.sources.get(name)
            if clock is None:
                continue
            clock.done = saved.get("done", False)
            if same_layout:
                # partitions are renumbered when parallelism changes: start afresh
                clock.partitions = {int(p): list(v) for p, v in saved["partitions"].items()}
        self.parallelism = parallelism

    def observe(self, source: str, partition: int, watermark_us: int | None,
                now_us: int) -> None:
        clock = self.sources[source]
        previous = clock.partitions.get(partition)
        best = watermark_us if watermark_us is not None else NO_WATERMARK
        if previous is not None:
            best = max(best, previous[0])
        clock.partitions[partition] = [best, now_us]

    def finish(self, source: str) -> None:
        self.sources[source].done = True

    @property
    def all_done(self) -> bool:
        return all(clock.done for clock in self.sources.values())

    def advance(self, now_us: int) -> int:
        """Recompute the pipeline watermark; it never goes back."""
        values = [clock.current(now_us) for clock in self.sources.values()]
        known = [v for v in values if v is not None]
        if known:
            self.value = max(self.value, min(known))
        return self.value

    def to_stored(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "parallelism": self.parallelism,
            "sources": {
                name: {"done": clock.done,
                       "partitions": {str(p): v for p, v in clock.partitions.items()}}
                for name, clock in self.sources.items()
            },
        }
