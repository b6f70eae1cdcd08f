"""`netsched operator`: run the operator with its settings; a bad policy file, a taken port or a webhook
without its certificate is one line on stderr and exit 2, a cluster it cannot reach one line and exit 1,
before anything starts."""

from __future__ import annotations

import logging
import sys

from netsched.api.subcommand import Command
from netsched.operator.config import OperatorConfig


def main(settings: OperatorConfig) -> int:
    from netsched.operator.gang_placer import BadExtenderTLS
    from netsched.operator.manager import PortTaken, run_operator
    from netsched.operator.webhook.server import WebhookUnset
    from netsched.packing.policy import InvalidPolicy

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        run_operator(settings)
    # say which file, port or flag; never half start
    except (InvalidPolicy, PortTaken, WebhookUnset, BadExtenderTLS) as exc:
        print(f"netsched: error: operator: {exc}", file=sys.stderr)
        return 2
    return 0


COMMAND = Command(
    "operator", "run the GPUJob operator (kopf)", OperatorConfig, main,
    "Run GPUJobs: create their pods behind a gang gate, release the gang when it fits, keep status, "
    "conditions and events true, and append one training record per finished job.")
