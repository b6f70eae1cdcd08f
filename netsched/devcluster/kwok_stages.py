"""KWOK Stages for the dev-cluster: the whole pod lifecycle (kwok --config).

A --config holding any Pod stage replaces KWOK's built-in pod stages, so these
cover everything a pod goes through:

  pod-ready                    a bound pod gets an IP and Ready containers: Running
  pod-complete                 Running pods owned by a Job succeed (KWOK's default behaviour),
                               unless annotated with one of the durations below
  pod-complete-after-duration  Running pods annotated netsched.io/duration (a Go duration such
                               as "30s") succeed that long after they started running
  pod-fail-after-duration      Running pods annotated netsched.io/fail-after fail (exit code 1)
                               that long after they started: for testing retries
  pod-delete-after-duration    pods being deleted that are annotated netsched.io/stop-after (a Go
                               duration) are removed that long later: a slow graceful shutdown
  pod-delete                   other pods being deleted are removed at once
"""

from __future__ import annotations

import yaml

from netsched.devcluster.pods import DURATION_ANNOTATION, FAIL_AFTER_ANNOTATION, STOP_AFTER_ANNOTATION

RUNNING_TEMPLATE = """\
{{ $started := Now }}
phase: Running
startTime: {{ $started | Quote }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
conditions:
{{ range $type := list "Initialized" "Ready" "ContainersReady" }}
- type: {{ $type }}
  status: "True"
  lastTransitionTime: {{ $started | Quote }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $started | Quote }}
{{ end }}
"""

FINISHED_TEMPLATE = """\
{{ $finished := Now }}
{{ $pod := . }}
phase: %(phase)s
conditions:
{{ range $type := list "Ready" "ContainersReady" }}
- type: {{ $type }}
  status: "False"
  reason: PodCompleted
  lastTransitionTime: {{ $finished | Quote }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: false
  started: false
  restartCount: 0
  state:
    terminated:
      exitCode: %(exit_code)d
      reason: %(reason)s
      startedAt: {{ or $pod.status.startTime $finished | Quote }}
      finishedAt: {{ $finished | Quote }}
{{ end }}
"""

SUCCEEDED_TEMPLATE = FINISHED_TEMPLATE % {"phase": "Succeeded", "exit_code": 0, "reason": "Completed"}
FAILED_TEMPLATE = FINISHED_TEMPLATE % {"phase": "Failed", "exit_code": 1, "reason": "Error"}
NOT_DELETING = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
RUNNING = {"key": ".status.phase", "operator": "In", "values": ["Running"]}


def _stage(name: str, match: list[dict], next_: dict, delay: dict | None = None) -> dict:
    spec: dict = {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchExpressions": match},
        "next": next_,
    }
    if delay:
        spec["delay"] = delay
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name}, "spec": spec}


def pod_stages() -> list[dict]:
    annotation = f'.metadata.annotations["{DURATION_ANNOTATION}"]'
    fail_after = f'.metadata.annotations["{FAIL_AFTER_ANNOTATION}"]'
    stop_after = f'.metadata.annotations["{STOP_AFTER_ANNOTATION}"]'
    deleting = {"key": ".metadata.deletionTimestamp", "operator": "Exists"}
    return [
        _stage("pod-ready", [NOT_DELETING, {"key": ".status.podIP", "operator": "DoesNotExist"}],
               {"statusTemplate": RUNNING_TEMPLATE}),
        # KWOK picks at random among matching stages: a Job's pod that says when it ends is left
        # to the stages below that read it
        _stage("pod-complete",
               [NOT_DELETING, RUNNING,
                {"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]},
                {"key": annotation, "operator": "DoesNotExist"},
                {"key": fail_after, "operator": "DoesNotExist"}],
               {"statusTemplate": SUCCEEDED_TEMPLATE}),
        _stage("pod-complete-after-duration",
               [NOT_DELETING, RUNNING, {"key": annotation, "operator": "Exists"}],
               {"statusTemplate": SUCCEEDED_TEMPLATE},
               delay={"durationMilliseconds": 0, "durationFrom": {"expressionFrom": annotation}}),
        _stage("pod-fail-after-duration",
               [NOT_DELETING, RUNNING, {"key": fail_after, "operator": "Exists"}],
               {"statusTemplate": FAILED_TEMPLATE},
               delay={"durationMilliseconds": 0, "durationFrom": {"expressionFrom": fail_after}}),
        _stage("pod-delete-after-duration", [deleting, {"key": stop_after, "operator": "Exists"}],
               {"finalizers": {"empty": True}, "delete": True},
               delay={"durationMilliseconds": 0, "durationFrom": {"expressionFrom": stop_after}}),
        _stage("pod-delete", [deleting, {"key": stop_after, "operator": "DoesNotExist"}],
               {"finalizers": {"empty": True}, "delete": True}),
    ]


def stages_yaml() -> str:
    return yaml.safe_dump_all(pod_stages(), sort_keys=False)
