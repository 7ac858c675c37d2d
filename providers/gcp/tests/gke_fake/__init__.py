"""The GKE side of the Compute fake (`../compute_fake.py`): node pools,
managed instance groups, GKE operations and GKE's node-join rules.

* `nodepools.py` — validation of `nodePools.create` and what a pool's
  instance template holds (pure);
* `mig.py` — managed instances and their groups;
* `world.py` — the state and actions, shared with the fake's instances;
* `join.py` — which instances become Nodes, with what (pure);
* `reservations.py` — Compute Engine reservations and which one an
  instance consumes, for plain inserts and groups alike;
* `routes.py` — the HTTP routes and test knobs.

See `providers/gcp/tests/README.md` for every rule and its upstream source.
"""

from .world import ApiError, World  # noqa: F401
