"""How every Helm release of a stack installs and upgrades (pulumi-kubernetes ``helm.v3.Release``).

A release left half-installed blocks the next ``pulumi up``: Helm refuses to install a name whose
last revision is ``failed`` or ``pending-install`` ("cannot re-use a name that is still in use").
So every release is installed and upgraded atomically:

- ``atomic``: a failed install is purged (the next ``pulumi up`` installs afresh) and a failed
  upgrade rolled back to the last deployed revision; it implies the wait (pulumi-kubernetes
  turns ``skipAwait`` off with it), so the release is done only when its workloads are ready;
- ``cleanup_on_fail``: the objects a failed upgrade created are deleted with the rollback;
- ``timeout``: how long Helm waits for each operation before it fails (and purges or rolls back).
  Helm's (and pulumi-kubernetes') default is 300 s; 600 s leaves room for the first pull of a
  controller's image on fresh system nodes and for kube-prometheus-stack's CRDs and pods. The
  device plugins' DaemonSets are ready with zero GPU nodes (no pod desired), so no release waits
  for a GPU node; the controllers run on the system nodes, which a new cluster's Kubernetes
  provider waits for (cluster.py), so their launch never counts against the timeout.

What atomic cannot undo: a ``pulumi up`` killed while Helm works (Ctrl-C twice, a lost session)
leaves the release ``pending-install`` or ``pending-upgrade``, with no process left to roll it back;
docs/deploying.md says how to recover.
"""

from __future__ import annotations

from typing import Any, Mapping

TIMEOUT_SECONDS = 600
"""Seconds Helm waits for each operation of a release (pulumi-kubernetes ``timeout``)."""

RELEASE_OPTIONS: Mapping[str, Any] = {"atomic": True, "cleanup_on_fail": True, "timeout": TIMEOUT_SECONDS}
"""The ``helm.v3.Release`` / ``ReleaseArgs`` arguments every release of the stacks passes."""
