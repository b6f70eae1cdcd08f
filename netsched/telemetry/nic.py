"""NIC counters from /proc/net/dev and link speed from /sys/class/net, as rates and utilisation."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PROC_NET_DEV = Path("/proc/net/dev")
SYS_NET = Path("/sys/class/net")


@dataclass(frozen=True)
class NicRate:
    interface: str
    rx_bytes_per_second: float
    tx_bytes_per_second: float
    speed_mbps: float | None  # None when the driver does not say (veth, lo, ...)

    def utilisation(self, direction: str) -> float | None:
        if not self.speed_mbps:
            return None
        rate = self.rx_bytes_per_second if direction == "rx" else self.tx_bytes_per_second
        return rate * 8 / (self.speed_mbps * 1e6)


def read_counters(text: str | None = None) -> dict[str, tuple[int, int]]:
    """interface -> (received bytes, transmitted bytes), from /proc/net/dev's format."""
    text = PROC_NET_DEV.read_text() if text is None else text
    out = {}
    for line in text.splitlines()[2:]:
        name, _, fields = line.partition(":")
        values = fields.split()
        if len(values) >= 9:
            out[name.strip()] = (int(values[0]), int(values[8]))
    return out


def link_speed_mbps(interface: str, sys_net: Path = SYS_NET) -> float | None:
    try:
        speed = int((sys_net / interface / "speed").read_text())
    except (OSError, ValueError):
        return None
    return float(speed) if speed > 0 else None


class NicMonitor:
    """Rates between successive samples; the first sample only sets the baseline."""

    def __init__(self, read: Callable[[], dict[str, tuple[int, int]]] = read_counters,
                 speed: Callable[[str], float | None] = link_speed_mbps,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.read, self.speed, self.clock = read, speed, clock
        self._last: tuple[float, dict[str, tuple[int, int]]] | None = None

    def sample(self) -> list[NicRate]:
        now, counters = self.clock(), self.read()
        last, self._last = self._last, (now, counters)
        if last is None or now <= last[0]:
            return []
        dt = now - last[0]
        rates = []
        for name, (rx, tx) in sorted(counters.items()):
            if name == "lo" or name not in last[1]:
                continue
            prx, ptx = last[1][name]
            # counters reset when an interface is re-created: no rate for that interval
            if rx >= prx and tx >= ptx:
                rates.append(NicRate(name, (rx - prx) / dt, (tx - ptx) / dt, self.speed(name)))
        return rates
