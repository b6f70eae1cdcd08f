"""The local dev-cluster: a real control plane, KWOK GPU nodes, pod builders."""
