"""The fleet: every cluster of an inventory (the hub's ClusterProfiles, a folder of profile
files, or profiles a program feeds), each with a credential kept fresh and clients that follow
it, engaged and disengaged as clusters come, change, turn unhealthy and go.

``cpcreds serve`` and controllers share this one inventory implementation. Modules:
:mod:`~cpcreds.fleet.inventory` (changes, the folder source, the feed), :mod:`~cpcreds.fleet.hub`
and :mod:`~cpcreds.fleet.hubclient` (the hub's list and watch), :mod:`~cpcreds.fleet.members`
(KEP-4322 inventory members: one profile per cluster), :mod:`~cpcreds.fleet.health` (the
``ControlPlaneHealthy`` gate), :mod:`~cpcreds.fleet.cluster` (:class:`FleetCluster` and the
events), :mod:`~cpcreds.fleet.core` (:class:`Fleet`: the keeping of each cluster's credential, the gate,
the events), :mod:`~cpcreds.fleet.scheduler` (when each cluster is fetched, one heap and timer
for all), :mod:`~cpcreds.fleet.hooks` (what a program built around a fleet, such as
``cpcreds serve``, hears of its bookkeeping) and :mod:`~cpcreds.fleet.metrics`. The
public names are exported by ``cpcreds`` itself; nothing here is imported until it is used.
"""
