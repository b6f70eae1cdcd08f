"""The shape netsched handles Kubernetes objects in: the API's own JSON, as plain dicts.

Watches, the extender protocol and the operator's handlers all deliver objects this way;
typed access happens where a field is read, not through the client's model classes.
"""

from __future__ import annotations

from typing import Any

KubeObject = dict[str, Any]
