"""netsched: network-aware GPU job scheduling for Kubernetes."""

__version__ = "0.1.0"
