"""NIC counters from /proc/net/dev and link speed from /sys/class/net, as rates and utilisation; and the
link speed of the interface the probes leave by (the route to a peer, /proc/net/route)."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PROC_NET_DEV = Path("/proc/net/dev")
PROC_NET_ROUTE = Path("/proc/net/route")
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


def route_interface(host: str, text: str | None = None) -> str | None:
    """The interface the kernel's IPv4 routes send traffic to host by (the longest matching prefix, from
    /proc/net/route's format: little-endian hex); None for a name, an IPv6 address or no route."""
    try:
        address = int(ipaddress.IPv4Address(host))
        text = PROC_NET_ROUTE.read_text() if text is None else text
    except (ValueError, OSError):
        return None
    best: tuple[int, str] | None = None
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        destination, mask = (int.from_bytes(bytes.fromhex(f), "little") for f in (fields[1], fields[7]))
        prefix = bin(mask).count("1")
        if address & mask == destination and (best is None or prefix > best[0]):
            best = (prefix, fields[0])
    return best[1] if best else None


def speed_towards(host: str) -> float | None:
    """Link speed (Mbit/s) of the interface traffic to host leaves by, None when the driver does not say."""
    interface = route_interface(host)
    return link_speed_mbps(interface) if interface else None


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
