"""Binding: one profile's handle on a CredentialEngine, and the one flow every answer follows.

``engine.bind(profile)`` resolves the profile once and returns a :class:`Binding`: what an
adapter (the kubernetes clients, ``cpcreds serve``'s keeper, a Fleet's cluster) holds for the
profile's life. It answers from the engine's cache (a hit is a dict lookup), fetches through the
engine's single-flight when it must, fails over as the config says, and after a 401 drops exactly
the credential that was rejected.

One flow, two drivers: an answer is a generator (:meth:`Answers.plan_flow` for one plan,
:meth:`~cpcreds.engine.failover.FailoverWalk.walk` across a profile's providers) that yields a
:data:`~cpcreds.engine.failover.Step` whenever a fetch must be led or waited for. :meth:`Answers.run`
drives it in the calling thread (it leads fetches itself and blocks on the flight);
:meth:`Answers.arun` drives it from an asyncio task (fetches run off the task; cancelling the
task cancels only its own wait, never the shared fetch).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Generator, Mapping
from typing import Any, Protocol

from ..credential import Credential
from .entries import CredentialStore, fresh_copy
from .failover import Answer, FailoverWalk, Route, Step
from .fetching import FetchRunner
from ..plan import AccessPlan

__all__ = ["Binding", "Binder", "Answers", "Closing"]


class Answers:
    """The answer flows of one engine and their sync and asyncio drivers."""

    def __init__(self, store: CredentialStore, runner: FetchRunner, walk: FailoverWalk) -> None:
        self.store = store
        self.runner = runner
        self.walk = walk

    def plan_flow(self, plan: AccessPlan) -> Generator[Step, None, Answer]:
        """One plan, no failover: the cached credential, else the outcome of its flight (a flight
        abandoned by its leader is claimed again: that was nobody's failure)."""
        while True:
            credential, flight, deadline = self.store.claim(plan)
            if credential is not None:
                return Answer(credential, plan)
            assert flight is not None
            yield plan, flight, deadline
            if not flight.abandoned:
                credential = flight.value  # the credential, read without the property's call
                if credential is not None:
                    return Answer(credential, plan)
                assert flight.error is not None
                raise fresh_copy(flight.error)

    def flow(self, plan: AccessPlan, route: Route | None) -> Generator[Step, None, Answer]:
        return self.plan_flow(plan) if route is None else self.walk.walk(route)

    def run(self, flow: Generator[Step, None, Answer]) -> Answer:
        """Drive ``flow`` in this thread: lead the fetches it asks for here, block on the others."""
        try:
            plan, flight, deadline = next(flow)
            while True:
                if deadline is not None:
                    self.runner.fetch(plan, flight, deadline)
                flight.wait()
                plan, flight, deadline = flow.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def arun(self, flow: Generator[Step, None, Answer]) -> Answer:
        """Drive ``flow`` from an asyncio task: fetches run off the task, waits are the task's own."""
        try:
            plan, flight, deadline = next(flow)
            while True:
                if deadline is not None:
                    self.runner.start(plan, flight, deadline)
                await flight.wait_async()
                plan, flight, deadline = flow.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def hit(self, plan: AccessPlan, route: Route | None) -> Answer | None:
        """The cached answer, read without a lock (the plan's own, or the route's), else None."""
        if route is not None:
            return self.walk.hit(route)
        credential = self.store.hit(plan)
        return None if credential is None else Answer(credential, plan)

    def answer(self, plan: AccessPlan, route: Route | None) -> Answer:
        """The cache hit (without a lock), else the flow driven in this thread."""
        hit = self.hit(plan, route)
        return hit if hit is not None else self.run(self.flow(plan, route))

    async def aanswer(self, plan: AccessPlan, route: Route | None) -> Answer:
        """As :meth:`answer`, the flow driven from an asyncio task."""
        hit = self.hit(plan, route)
        return hit if hit is not None else await self.arun(self.flow(plan, route))


class Closing:
    """Resources to close when the engine closes, held weakly: a client the application drops
    without ``close()`` is not kept alive by the engine."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._resources: weakref.WeakSet[Any] = weakref.WeakSet()

    def add(self, resource: Any) -> Callable[[], None]:
        """Close ``resource`` (anything with ``close()``) with the engine; returns a function
        that takes it off the list again (call it when the resource closes first)."""
        with self._lock:
            self._resources.add(resource)
        ref = weakref.ref(resource)

        def cancel() -> None:
            live = ref()
            if live is not None:
                with self._lock:
                    self._resources.discard(live)

        return cancel

    def close_all(self) -> None:
        with self._lock:
            resources = list(self._resources)
            self._resources.clear()
        for resource in resources:
            resource.close()


class Binding:
    """One ClusterProfile's handle on a :class:`~cpcreds.CredentialEngine` (``engine.bind(profile)``).

    What a caller can rely on:

    - :attr:`plan` is the profile's preferred :class:`~cpcreds.AccessPlan`, resolved once when
      the binding was made; a changed profile needs a new binding.
    - :meth:`credential` / :meth:`acredential` return a valid credential: the engine's cached one
      (a dict lookup, no lock), or the outcome of the one fetch that every caller of that plan
      shares. They raise only :class:`~cpcreds.CredentialError` subclasses (``KeyboardInterrupt``
      and ``SystemExit`` pass through). Cancelling an ``acredential()`` cancels only that wait.
    - :meth:`answer` / :meth:`aanswer` also say which plan answered: with failover
      (:attr:`fails_over`), a later provider's plan while the preferred one fails, and the
      preferred one again as soon as it answers.
    - :meth:`invalidate` after a 401 drops the rejected credential only if it is still the cached
      one (of whichever of the profile's plans holds it), so a late 401 never throws away a newer
      credential; the next call fetches.
    - :meth:`on_close` closes a resource (a client) when the engine closes.
    - A binding made with ``engine.bind(profile, hold=True)`` *holds* its plans: :meth:`release`
      (the profile is gone) drops their credentials from the engine's cache unless another held
      binding still uses them (equal plans share one credential). A Fleet holds every cluster's
      binding and releases it when the cluster leaves or its plan changes.

    Thread-safe and asyncio-safe; as cheap to keep as a plan. After ``engine.close()`` every call
    raises :class:`~cpcreds.EngineClosed`.
    """

    __slots__ = ("plan", "_route", "_answers", "_closing", "_held", "__weakref__")

    def __init__(self, plan: AccessPlan, route: Route | None, answers: Answers, closing: Closing, held: bool = False) -> None:
        #: The profile's preferred plan.
        self.plan = plan
        self._route = route
        self._answers = answers
        self._closing = closing
        self._held = held  # the caller (engine.bind) has added this binding's hold on ``plan``

    @property
    def fails_over(self) -> bool:
        """Whether a failure of the preferred provider moves on to the next one (config ``failover``)."""
        return self._route is not None

    @property
    def plans(self) -> tuple[AccessPlan, ...]:
        """The preferred plan, then (once failover has looked past it) the other providers' plans."""
        chain = self._route.built if self._route is not None else None
        if chain is None:
            return (self.plan,)
        return (self.plan,) + tuple(candidate.plan for candidate in chain[1:] if candidate.plan is not None)

    def credential(self) -> Credential:
        """A valid credential for the profile (see the class docstring)."""
        return self._answers.answer(self.plan, self._route).credential

    async def acredential(self) -> Credential:
        """asyncio version of :meth:`credential`: the fetch never runs in the calling task."""
        return (await self._answers.aanswer(self.plan, self._route)).credential

    def answer(self) -> Answer:
        """The credential and the plan whose provider answered it."""
        return self._answers.answer(self.plan, self._route)

    async def aanswer(self) -> Answer:
        """asyncio version of :meth:`answer`."""
        return await self._answers.aanswer(self.plan, self._route)

    def invalidate(self, credential: Credential) -> bool:
        """``credential`` was rejected (HTTP 401): drop it if it is still cached for this profile.
        True when dropped (the next call fetches a new one); False when it was already replaced."""
        return self._answers.store.invalidate(list(self.plans), credential)

    def on_close(self, resource: Any) -> Callable[[], None]:
        """Call ``resource.close()`` when the engine closes (held weakly). Returns a function that
        cancels this; call it when the resource is closed first."""
        return self._closing.add(resource)

    def release(self) -> None:
        """The profile is gone (a held binding, see ``engine.bind(..., hold=True)``): drop the
        credentials of its plans from the engine's cache, with their backoff, unless another
        held binding uses the same plan. A fetch in flight still answers the callers waiting
        for it, and its answer is not cached. Idempotent; nothing for a binding never held."""
        store = self._answers.store
        with store.lock:
            if not self._held:
                return
            self._held = False
            keys = [self.plan.key]
            route = self._route
            if route is not None:
                route.held = False  # a chain built from now on holds nothing
                keys += route.later_keys()
            store.drop_holds(keys)

    def __repr__(self) -> str:
        from .._show import shown_url

        return f"Binding(provider={self.plan.provider!r}, server={shown_url(self.plan.cluster.server)!r}, fails_over={self.fails_over})"


class Binder(Protocol):
    """What the adapters need of an engine: ``bind(profile)`` (a :class:`~cpcreds.CredentialEngine`)."""

    def bind(self, profile: Mapping[str, Any] | Any) -> Binding: ...
