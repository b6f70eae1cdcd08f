"""The extender's filters and scorers: one folder each, registered here in the order they run.

Adding a signal is adding its folder and one line below. Filters run for filter and preempt,
in this order (the first reason a node gets is the one reported); network scorers make up
the topology heuristic's network value, weighted by their `weight` where they apply; the
tie-break adds its `weight` of the score (netsched.models.heuristic.with_packing).

The rest of the extender imports the plugins from here only, with the few annotations it reads
itself: a job's size (the read model's holds) and the data source and job GPUs (the model's
features).
"""

from __future__ import annotations

from netsched.extender.plugin import Filter, Scorer
from netsched.extender.plugins.bin_packing import BinPacking
from netsched.extender.plugins.data import DataCloseness
from netsched.extender.plugins.data.annotation import ENDPOINT, DataSource, data_source
from netsched.extender.plugins.data_distance import DataDistance
from netsched.extender.plugins.gang_hold import GangHold
from netsched.extender.plugins.job_room import JobRoom
from netsched.extender.plugins.job_room.annotation import job_gpus, job_size
from netsched.extender.plugins.network_limits import NetworkLimits
from netsched.extender.plugins.peer_distance import PeerDistance
from netsched.extender.plugins.peers import PeerCloseness
from netsched.extender.plugins.plan_pins import PlanPins
from netsched.extender.plugins.whole_job import WholeJob

FILTERS: tuple[Filter, ...] = (PeerDistance(), DataDistance(), NetworkLimits(), PlanPins(), GangHold(),
                              WholeJob())
SCORERS: tuple[Scorer, ...] = (PeerCloseness(), JobRoom(), DataCloseness())
TIE_BREAK = BinPacking()

__all__ = ["ENDPOINT", "FILTERS", "SCORERS", "TIE_BREAK", "DataSource", "data_source", "job_gpus", "job_size"]
