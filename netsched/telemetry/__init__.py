"""Network telemetry agent and store. Lands with issue 5."""
