"""Test tools that unit tests import: object builders (`builders`), small trained-model
fixtures (`models`) and a fake Kubernetes API server behind a real ApiClient (`kube`).

Serving code never imports this package (an import-linter contract in pyproject.toml).
"""
