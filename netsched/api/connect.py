"""How netsched's components reach the API server."""

from __future__ import annotations

import json

from kubernetes import client, config


def api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """From a kubeconfig file if given, else in-cluster credentials, else ~/.kube/config."""
    if kubeconfig:
        return config.new_client_from_config(config_file=kubeconfig)
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


def api_message(exc: client.ApiException) -> str:
    """The API server's own message for a failed call (its Status body), else the HTTP status."""
    try:
        message: str = json.loads(exc.body)["message"]
        return message
    except (TypeError, ValueError, KeyError):
        return f"{exc.status} {exc.reason}"
