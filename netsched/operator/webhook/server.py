"""kopf's HTTPS server for the webhooks, from the operator's settings; a port without its certificate is
said before anything starts."""

from __future__ import annotations

import os

import kopf

from netsched.operator.config import OperatorConfig


class WebhookUnset(ValueError):
    """--webhook-port without the certificate to serve it with."""


def webhook_server(settings: OperatorConfig) -> kopf.WebhookServer | None:
    """The admission webhook's server with --webhook-port, else None; it reloads the certificate when the
    files change."""
    if not settings.webhook_port:
        return None
    if not (settings.webhook_cert_file and settings.webhook_key_file):
        raise WebhookUnset("--webhook-port needs --webhook-cert-file and --webhook-key-file: the API server "
                           "calls webhooks over HTTPS only")
    for flag, path in (("--webhook-cert-file", settings.webhook_cert_file),
                       ("--webhook-key-file", settings.webhook_key_file)):
        if not os.access(path, os.R_OK):
            raise WebhookUnset(f"{flag}={path} cannot be read: give the webhook's PEM file (in the chart, "
                               "the Secret of operator.webhook.tls, mounted at /etc/netsched/webhook)")
    return kopf.WebhookServer(addr=settings.host, port=settings.webhook_port,
                              certfile=str(settings.webhook_cert_file),
                              pkeyfile=str(settings.webhook_key_file))
