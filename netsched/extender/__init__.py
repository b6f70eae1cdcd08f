"""Scheduler extender (kube-scheduler extender v1 over HTTP). Lands with issue 3."""
