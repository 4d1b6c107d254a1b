"""The fleet: every cluster of an inventory (the hub's ClusterProfiles, a folder of profile
files, or profiles a program feeds), each with a credential kept fresh and clients that follow
it, engaged and disengaged as clusters come, change, turn unhealthy and go.

``cpcreds serve`` and controllers share this one inventory implementation. Modules:
:mod:`~cpcreds.fleet.inventory` (changes, the folder source, the feed), :mod:`~cpcreds.fleet.hub`
and :mod:`~cpcreds.fleet.hubclient` (the hub's list and watch), :mod:`~cpcreds.fleet.members`
(KEP-4322 inventory members: one profile per cluster), :mod:`~cpcreds.fleet.health` (the
``ControlPlaneHealthy`` condition), :mod:`~cpcreds.fleet.cluster` (:class:`FleetCluster` and the
events), :mod:`~cpcreds.fleet.core` (:class:`Fleet`, the façade over the parts:
:mod:`~cpcreds.fleet.tracker`, the clusters tracked; :mod:`~cpcreds.fleet.keeper`, each cluster's
credential kept fresh; :mod:`~cpcreds.fleet.gate`, engaged or not; :mod:`~cpcreds.fleet.events`,
the events to iterators and callbacks; :mod:`~cpcreds.fleet.progress`, the first sync;
:mod:`~cpcreds.fleet.sharding`, the shard's membership and fencing; :mod:`~cpcreds.fleet.runtime`,
the thread or loop and closing), :mod:`~cpcreds.fleet.scheduler` (when each cluster is fetched,
one heap and timer for all), :mod:`~cpcreds.fleet.hooks` (what a program built around a fleet, such as
``cpcreds serve``, hears of its bookkeeping) and :mod:`~cpcreds.fleet.metrics`. The
public names are exported by ``cpcreds`` itself; nothing here is imported until it is used.
"""
