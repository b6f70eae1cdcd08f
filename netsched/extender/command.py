"""`netsched extender`: serve the extender with its settings; its entry in the CLI."""

from __future__ import annotations

import logging
import sys

from netsched.api.subcommand import Command
from netsched.extender.config import ExtenderConfig


def main(settings: ExtenderConfig) -> int:
    from netsched.api.connect import api_client, reachable
    from netsched.extender.server import CONNECTIONS, BadTLS, check_tls, serve

    try:
        check_tls(settings)  # before the API server is asked anything: a wrong flag is the first thing said
    except BadTLS as exc:
        print(f"netsched: error: extender: {exc}", file=sys.stderr)
        return 2
    api = reachable(api_client(settings.kubeconfig, connections=CONNECTIONS))  # else one line, exit 1
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    serve(api, settings)
    return 0


COMMAND = Command(
    "extender", "run the scheduler extender (HTTP)", ExtenderConfig, main,
    "Serve the kube-scheduler extender v1 verbs filter, prioritize and preempt, answering from a watch-fed "
    "cache of Nodes and Pods.")
