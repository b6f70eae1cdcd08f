"""`netsched whatif` for a workload that is not a GPUJob: a batch Job, a JobSet or a LeaderWorkerSet.

Its gangs (netsched.foresight.workload_gangs) are answered with the gang controller's own rules: the
same validation of the `netsched.io/*` annotations (netsched.jobs.validation, as for pod gangs), the
same fit (capacity.gang_fit, with NeverFits and its words), where it would go and the room per
domain. Gangs of one workload are placed one after the other, each in the room the ones before it
left, so "2 of 3 fit now" is what the controller would release now. Whether its pods would be gated at
all is said too: a pod netsched does not gate is scheduled on its own, with no gang.

When each gang would start and finish: its gangs join the operator's forecast (netsched.jobs.forecast)
as the waiting pod gangs they would be (netsched.jobs.live_gangs.LiveGang), beside the cluster's
GPUJobs and pod gangs, in line after those of their priority already there; their run time from the
template's `netsched.io/expected-duration-seconds`, else the finished jobs.

Not yet: the packer's dry run.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from netsched.api.conditions import NEVER_FITS as NEVER_FITS_REASON
from netsched.api.gpujob import PREDICTED_FINISH_RANGE, PREDICTED_START_RANGE
from netsched.api.labels import DATA_SOURCE, GANG_OPT_IN_LABEL, GANG_OPT_IN_VALUE, SCHEDULER_NAME
from netsched.api.resources import Resources
from netsched.foresight.suspension import held
from netsched.foresight.whatif import (
    NEVER_FITS,
    Cluster,
    WhatIfError,
    forecast_lines,
    from_now,
    joint_placement,
    missing_priority_class,
    pending_requests,
    placed_by,
    placement_rows,
    placement_text,
    placer_notes,
    priority_of,
    range_texts,
    room_lines,
    room_table,
    time_text,
)
from netsched.foresight.workload_gangs import GangSet, NotAGang, gang_sets
from netsched.jobs.capacity import gang_fit, placement
from netsched.jobs.forecast import Forecast, cluster_forecast
from netsched.jobs.kueue_topology import placed_by_kueue
from netsched.jobs.live_gangs import LiveGang, gang_key
from netsched.jobs.pod_gang import PodGang
from netsched.jobs.replica_pods import GANG_GATE, NETWORK_ANNOTATIONS
from netsched.jobs.validation import problems
from netsched.operator.cluster_index import GangMember
from netsched.operator.pod_gangs.decision import decide


def what_if_workload(cluster: Cluster, manifest: dict[str, Any], namespace: str, opted_in: bool | None,
                     unchecked: str | None = None, past: list[dict[str, Any]] | None = None,
                     now: datetime | None = None, kueue_installed: bool | None = None) -> dict[str, Any]:
    """The answer for the workload `manifest` in `namespace` (its namespace opted in to netsched's
    webhook, or not, or None: unknown); `unchecked`: why the API server did not check it; `past`: the
    finished jobs to learn run times from (netsched.foresight.whatif.history); `kueue_installed`: does
    the API server serve Kueue (None: not known), for a suspended or queued workload.
    WhatIfError with the problems the gang controller would report."""
    try:
        sets = gang_sets(manifest, namespace)
    except NotAGang as exc:
        raise WhatIfError(str(exc)) from None
    rooms = cluster.rooms
    found = [f"{_relative(p, s.template)}" for s in sets
             for p in problems(s.gang, s.gang.annotations, rooms, spec_fields=False,
                               topology=cluster.topology)
             + missing_priority_class(s.gang, cluster.priority_classes)]
    if found:
        raise WhatIfError("; ".join(dict.fromkeys(found)))
    used, pending = cluster.used, pending_requests(cluster.pods)
    answer: dict[str, Any] = {
        "workload": f"{manifest['kind']} {namespace}/{manifest['metadata'].get('name')}",
        "notes": [*([unchecked] if unchecked else []), *cluster.notes], "gangs": []}
    hold, note = held(manifest, kueue_installed)
    if hold is not None:
        answer["held"] = {"message": hold.message, "never": hold.never, "queue": hold.queue}
    if note:
        answer["notes"].append(note)
    for s in sets:
        gang = s.gang
        gated, how = gating(s, namespace, opted_in)
        entry: dict[str, Any] = {
            "gang": s.label, "template": s.template, "count": s.count, "size": gang.size,
            "gpusPerMember": gang.gpus_per_member, "priority": priority_of(gang, cluster.priority_classes),
            "gated": gated, "gating": how, "needs": needs(gang), "fitNow": 0, "placement": []}
        aside = steps_aside(s)
        if aside is not None:
            entry["stepsAside"] = aside
            entry["gated"] = False
            entry["gating"] = ("not ganged: Kueue places its pods, and netsched's gang controller lifts its "
                               "gate as soon as they exist")
        for i in range(s.count):
            fit = gang_fit(rooms, used, pending, gang, cluster.topology)
            if i == 0:
                entry["schedulable"] = {"fits": fit.fits, "reason": fit.why, "message": fit.message}
                entry["domains"] = room_table(gang, rooms, cluster.used, gang.needs.max_peer_distance,
                                              cluster.topology)
            joint = None
            if aside is not None:  # Kueue places its pods: netsched neither pins nor places them
                break
            if i == 0 and fit.fits:  # the first gang as the operator would release it now
                meta = gang.member.get("metadata") or {}
                members = [{**gang.member, "metadata": {**meta, "name": f"{s.first.name}-{k}"}}
                           for k in range(gang.size)]
                joint = joint_placement(cluster, gang, namespace, f"{s.first.kind}/{s.first.name}", members)
                entry["placedBy"] = "extender" if joint else "estimate"
            where = joint or (placement(rooms, used, gang, cluster.topology) if fit.fits else None)
            if not where:
                break
            entry["fitNow"] += 1
            if i == 0:
                entry["placement"] = placement_rows(where, rooms, cluster.topology)
            used = _taking(used, where, gang.member_request)
        if s.note:
            entry["note"] = s.note
        answer["gangs"].append(entry)
    answer["notes"] += placer_notes(cluster)
    predicted(cluster, sets, answer["gangs"], past or [], now or datetime.now(UTC))
    if hold is not None:  # no pods until it is admitted or resumed: no start to predict from now
        for entry in answer["gangs"]:
            entry.update(predictedStartTime=None, predictedCompletionTime=None, waitsFor=[])
            entry.update(dict.fromkeys((*PREDICTED_START_RANGE, *PREDICTED_FINISH_RANGE)))
            entry.pop("predictedPerGang", None)
    return answer


def steps_aside(s: GangSet) -> dict[str, str] | None:
    """What the gang controller says of a gang whose pods Kueue's topology-aware scheduling places (its
    own decision, so whatif says what the operator will), None for a gang netsched places."""
    if placed_by_kueue(s.gang.member) is None:
        return None
    said = decide(s.first, s.gang.size, [GangMember(s.first.name, s.gang.member)], [], {}, [])
    return {"type": said.type, "reason": said.reason, "message": said.message}


def predicted(cluster: Cluster, sets: list[GangSet], entries: list[dict[str, Any]],
              past: list[dict[str, Any]], now: datetime) -> None:
    """Each gang set's forecast into its entry: its run time, the predicted start of its first gang (now
    for one that fits now) and the jobs it waits for, the predicted completion of its last one (none
    while one has none), and with several gangs each one's times ("predictedPerGang")."""
    keys: list[list[str]] = []
    pretend: list[LiveGang] = []
    for s, entry in zip(sets, entries, strict=True):
        keys.append([])
        for ref in s.refs():
            keys[-1].append(gang_key(ref))
            # created now, one after the other: in line after every gang of its priority already there
            pretend.append(LiveGang(gang_key(ref), s.gang, True, now + timedelta(microseconds=len(pretend)),
                                    None, entry["priority"], (s.gang.member,), frozenset()))
    forecasts = cluster_forecast(now, cluster.rooms, cluster.pods, cluster.jobs, past,
                                 [*cluster.pod_gangs(), *pretend], topology=cluster.topology)
    for entry, gang_keys in zip(entries, keys, strict=True):
        entry |= _times(entry, [forecasts[k] for k in gang_keys], now)


def _times(entry: dict[str, Any], forecasts: list[Forecast], now: datetime) -> dict[str, Any]:
    starts = [now if i < entry["fitNow"] else f.start for i, f in enumerate(forecasts)]
    finishes = [f.finish for f in forecasts]
    first = forecasts[0]
    times: dict[str, Any] = {
        "estimate": {"seconds": first.estimate.seconds, "basis": first.estimate.basis},
        "predictedStartTime": time_text(starts[0]),
        "predictedCompletionTime": None if None in finishes else time_text(max(f for f in finishes if f)),
        "waitsFor": list(first.after) if not entry["fitNow"] else [],
        # the first gang's start, the last one's completion: each bound the latest of the gangs'
        **range_texts(None if entry["fitNow"] else first.start_range, _latest(forecasts))}
    if len(forecasts) > 1:
        times["predictedPerGang"] = [
            {"predictedStartTime": time_text(start), "predictedCompletionTime": time_text(f.finish)}
            for start, f in zip(starts, forecasts, strict=True)]
    return times


def _latest(forecasts: list[Forecast]) -> tuple[datetime, datetime] | None:
    """The P10 and P90 of the last completion among `forecasts` (None: one has no interval)."""
    ranges = [f.finish_range for f in forecasts]
    if any(r is None for r in ranges):
        return None
    return max(r[0] for r in ranges if r), max(r[1] for r in ranges if r)


def needs(gang: PodGang) -> dict[str, str]:
    """The network needs its pods' `netsched.io/*` annotations give the gang, by annotation (those of a
    GPUJob's spec.network, and where its data is)."""
    read = (*NETWORK_ANNOTATIONS.values(), DATA_SOURCE)
    return {k: gang.annotations[k] for k in read if gang.annotations.get(k)}


def gating(s: GangSet, namespace: str, opted_in: bool | None) -> tuple[bool | None, str]:
    """Would the gang's pods be held by netsched's gate (None: cannot tell), and how, in words."""
    spec = s.gang.member_spec
    gates = {g.get("name") for g in spec.get("schedulingGates") or () if isinstance(g, dict)}
    scheduler = spec.get("schedulerName") or "default-scheduler"
    label = f"{GANG_OPT_IN_LABEL}={GANG_OPT_IN_VALUE}"
    if GANG_GATE in gates:
        return True, f"gated: its template has the {GANG_GATE} scheduling gate"
    if scheduler != SCHEDULER_NAME:
        return False, (f"not gated: its pods name scheduler {scheduler!r}, which netsched's webhook leaves "
                       "alone, so they would be scheduled pod by pod, not as a gang; set "
                       f"{s.template}.spec.schedulerName: {SCHEDULER_NAME}")
    if opted_in:
        return True, f"gated by netsched's admission webhook (namespace {namespace} has {label})"
    if opted_in is None:
        return None, (f"gated only if namespace {namespace} has {label} (its labels could not be read); "
                      f"to be sure, add {{name: {GANG_GATE}}} to {s.template}.spec.schedulingGates")
    # the chart's webhook.namespaces "all" needs no label: that scope is not visible to a user, so said
    return False, (f"not gated: namespace {namespace} is not opted in to netsched's admission webhook and "
                   f"the template has no {GANG_GATE} gate, so its pods would be scheduled pod by pod, not as "
                   f"a gang (unless the webhook is set to every namespace); label the namespace {label}, or "
                   f"add {{name: {GANG_GATE}}} to {s.template}.spec.schedulingGates")


def _taking(used: dict[str, Resources], where: dict[str, int], request: Resources) -> dict[str, Resources]:
    """`used` with `where`'s members (per node) of `request` added: the room the next gang finds."""
    out: dict[str, Resources] = defaultdict(dict, {n: dict(r) for n, r in used.items()})
    for node, k in where.items():
        for name, amount in request.items():
            out[node][name] = out[node].get(name, 0.0) + amount * k
    return dict(out)


def _relative(problem: str, template: str) -> str:
    """A validation problem (which names a Job's `spec.template`) at the workload's own template."""
    job_template = "spec.template."
    return problem.replace(job_template, f"{template}.", 1) if problem.startswith(job_template) else problem


def render_workload(answer: dict[str, Any], now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    alone = len(answer["gangs"]) == 1 and answer["gangs"][0]["gang"] == answer["workload"]  # a Job
    lines = [] if alone else [answer["workload"] + ":"]
    lines += [f"Note: {n}" for n in answer["notes"]]
    hold = answer.get("held")
    if hold:
        lines.append(f"Held: it {hold['message']}")
    for g in answer["gangs"]:
        gangs = "1 gang" if g["count"] == 1 else f"{g['count']} gangs"
        lines.append(f"{g['gang']}: {gangs} of {g['size']} pod(s) × {g['gpusPerMember']} GPU(s), "
                     f"priority {g['priority']} ({g['template']})")
        lines.append(f"  {g['gating'][0].upper()}{g['gating'][1:]}")
        lines.append("  Network needs: " + (", ".join(f"{k}={v}" for k, v in g["needs"].items())
                                            or "none (no netsched.io/* limits on its pods)"))
        if g.get("note"):
            lines.append(f"  Note: {g['note']}")
        if g.get("stepsAside"):
            aside = g["stepsAside"]
            lines.append(f"  The gang controller will say ({aside['type']} {aside['reason']}): "
                         f"{aside['message']}")
            continue
        s = g["schedulable"]
        fits = "yes" if s["fits"] else "no"
        if g["count"] > 1:
            fits += f", {g['fitNow']} of {g['count']} gangs at once"
        lines.append(f"  Fits now: {fits} ({s['reason']}): {s['message']}")
        if g["placement"]:
            lines.append("  Would run on: " + placement_text(g["placement"]) + placed_by(g))
        lines += ["  " + line for line in room_lines(g["domains"], "members of this gang")]
        if "estimate" in g:
            lines += ["  " + line for line in forecast_lines(g, NEVER_FITS, now)]
            lines += _last_start(g, now)
        if hold and s["reason"] != NEVER_FITS_REASON:
            lines.append("  Predicted start: " + ("never (nothing will start it)" if hold["never"]
                                                  else "when Kueue admits it"))
    return "\n".join(lines + ["Nothing was created."])


def _last_start(g: dict[str, Any], now: datetime) -> list[str]:
    """When the last of several gangs starts, if not with the first."""
    last = (g.get("predictedPerGang") or [{}])[-1].get("predictedStartTime", g["predictedStartTime"])
    if not g["predictedStartTime"] or last == g["predictedStartTime"]:
        return []
    return [f"  The last of its {g['count']} gangs: predicted start " + (
        f"{last} ({from_now(last, now)})" if last else "unknown (the room it needs is held by pods with no "
                                                        "predicted end)")]
