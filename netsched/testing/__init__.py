"""Test tools that tests and benchmarks import: object builders (`builders`), a fake Kubernetes API
server behind a real ApiClient (`kube`), extender requests (`extender`), small trained-model fixtures
(`models`), dev-clusters for the integration tests (`cluster`), the chart installed on a real node
(`chart`), the kubectl plugin as pip installs it (`plugin`) and the packer's scenario grid
(`packing_scenarios`); README.md says more.

Serving code never imports this package (an import-linter contract in pyproject.toml).
"""
