"""First-order estimates of a row's completion time, derived from its features: seconds that extrapolate.

A tree splits a feature only at values it saw in training, so a GPU faster than any it saw, or a
link slower, is scored like the fastest or slowest one seen: on a cluster left out of training
(bench/loco.py) that is where a tree model loses most (an H200 scored as an H100). These
estimates put the features together the way time adds up, so a linear model over their logs
carries a new GPU or link speed in the right direction and by about the right amount, and
trees learn what the estimates miss. They use no constant fitted to any data source:

- compute: the job's own duration hint (expected_seconds), taken as measured on a reference
  GPU (REFERENCE: an H100-SXM), scaled by the geometric mean of the node GPU's tensor TFLOPS and
  memory bandwidth ratios to it (a roofline midpoint between compute- and memory-bound);
- transfer: the job's input share per replica over the measured bandwidth to the data, of
  which a NIC busy `nic_util` leaves 1 - nic_util; 0 when the data is on the node itself;
- exchange: a ring all-reduce's 2 (r-1)/r of the GB exchanged over the job's expected run
  (comm_gb_per_hour x expected hours) over the weakest measured link to a peer, under the same
  NIC share; 0 without peers or with every peer on the node itself (NVLink);
- total: their sum.

Each is NaN where an input it needs is unknown (trees read NaN natively; linear models impute).
A feature list without some inputs (the network-blind features) gets only the estimates its
features allow (`estimate_names`): no estimate brings back a column the list left out.

`peers_by_reach` restates where a job's peers are so that a model constrained to be monotone in
each column can never prefer a node because fewer peers are near it: the shares become
cumulative (within the node, within its rack, within its zone), so moving a peer closer raises
one or more of them and lowers none; the weakest link's bandwidth becomes its reciprocal
(seconds per megabit), so that every link column grows as the link gets slower; and where the
exchange crosses no link (no peers, or every peer on the node itself) both link columns are 0,
their fastest value, rather than NaN ("not measured"). Gradient boosting may send NaN past the
largest value it saw, so an unmeasured link can read as the slowest, never as faster than none.
Pure numpy: the extender computes the same columns when it serves a model that uses them.
"""

from __future__ import annotations

import numpy as np

REFERENCE_TFLOPS16, REFERENCE_MEM_BW_GBPS = 989.0, 3350.0  # H100-SXM: what expected_seconds is taken as
MIN_NIC_SHARE = 0.05  # a NIC reported fully busy still moves some bytes

NEEDS = {
    "est_log_compute_s": ("expected_seconds", "gpu_tflops16", "gpu_mem_bw_gbps"),
    "est_log1p_transfer_s": ("input_size_gb", "replicas", "data_bw_mbps", "data_distance", "nic_util"),
    "est_log1p_exchange_s": ("comm_gb_per_hour", "expected_seconds", "replicas", "peer_count",
                             "peer_frac_node", "peer_bw_mbps", "nic_util"),
}
TOTAL = "est_log_total_s"  # only where all three parts can be estimated


def estimate_names(features: tuple[str, ...]) -> tuple[str, ...]:
    """The estimates `features` allow, in a fixed order."""
    names = tuple(name for name, needs in NEEDS.items() if set(needs) <= set(features))
    return (*names, TOTAL) if len(names) == len(NEEDS) else names


def peers_by_reach(X: np.ndarray, features: tuple[str, ...]) -> np.ndarray:
    """X (or X with estimates appended) with peer_frac_rack and peer_frac_zone made cumulative (the
    share within the rack or the zone, the node included), peer_bw_mbps read as seconds per megabit,
    and both link columns 0 where no peer is off the node; X itself where `features` lack the peer
    columns. Estimates are computed from the columns as written, before this."""
    at = {name: j for j, name in enumerate(features)}
    if not {"peer_count", "peer_frac_node", "peer_frac_rack", "peer_frac_zone"} <= set(at):
        return X
    out = np.array(X, dtype=np.float64, copy=True)
    node = out[:, at["peer_frac_node"]].copy()
    out[:, at["peer_frac_rack"]] += node
    out[:, at["peer_frac_zone"]] += out[:, at["peer_frac_rack"]]
    no_link = (out[:, at["peer_count"]] == 0) | (node >= 1)
    if "peer_bw_mbps" in at:
        with np.errstate(divide="ignore"):
            per_megabit = 1 / out[:, at["peer_bw_mbps"]]
        # a link reported at 0 Mbit/s reads as unknown, not infinite
        out[:, at["peer_bw_mbps"]] = np.where(np.isfinite(per_megabit), per_megabit, np.nan)
    for name in ("peer_bw_mbps", "peer_rtt_ms"):
        if name in at:
            out[no_link, at[name]] = 0.0
    return out


def with_estimates(X: np.ndarray, features: tuple[str, ...]) -> np.ndarray:
    """X (rows in the order of `features`) with the `estimate_names(features)` columns appended."""
    at = {name: j for j, name in enumerate(features)}

    def col(name: str) -> np.ndarray:
        return np.asarray(X[:, at[name]], dtype=np.float64)

    names = estimate_names(features)
    if not names:
        return X
    out: dict[str, np.ndarray] = {}
    with np.errstate(all="ignore"):
        if "est_log_compute_s" in names:
            ratio = (REFERENCE_TFLOPS16 / col("gpu_tflops16")
                     * REFERENCE_MEM_BW_GBPS / col("gpu_mem_bw_gbps"))
            compute = col("expected_seconds") * np.sqrt(ratio)
            out["est_log_compute_s"] = np.log(compute)
        share = None
        if "nic_util" in at:
            share = np.maximum(1 - np.nan_to_num(col("nic_util"), nan=0.0), MIN_NIC_SHARE)
        if "est_log1p_transfer_s" in names:
            local = col("data_distance") == 0
            transfer = col("input_size_gb") / col("replicas") * 8000 / (col("data_bw_mbps") * share)
            transfer = np.where(local, 0.0, transfer)
            out["est_log1p_transfer_s"] = np.log1p(transfer)
        if "est_log1p_exchange_s" in names:
            r = col("replicas")
            gb = col("comm_gb_per_hour") * col("expected_seconds") / 3600
            exchange = 2 * (r - 1) / r * gb * 8000 / (col("peer_bw_mbps") * share)
            remote = (col("peer_count") > 0) & ~(np.nan_to_num(col("peer_frac_node"), nan=0.0) >= 1)
            exchange = np.where(remote, exchange, 0.0)
            out["est_log1p_exchange_s"] = np.log1p(exchange)
        if TOTAL in names:
            total = (compute + np.nan_to_num(transfer, nan=0.0) + np.nan_to_num(exchange, nan=0.0))
            out[TOTAL] = np.log(total)
    columns = [np.where(np.isfinite(out[n]), out[n], np.nan) for n in names]
    return np.column_stack([X, *columns])
