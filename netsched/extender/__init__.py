"""Scheduler extender (kube-scheduler extender v1 over HTTP)."""
