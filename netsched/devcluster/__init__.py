"""Cluster access: the local dev-cluster, node topology, pod builders."""
