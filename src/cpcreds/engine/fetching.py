"""Fetch running: one provider call per flight, in the right place, by its deadline, counted.

A fetch is led by one caller (:meth:`FetchRunner.fetch` in a thread that leads it,
:meth:`FetchRunner.start` for an asyncio caller, :meth:`FetchRunner.refresh` for nobody), runs in
one of :class:`~cpcreds.engine.workers.Workers`' slots, and ends by publishing its outcome to the
:class:`~cpcreds.engine.entries.CredentialStore` and waking the flight's waiters.

Providers say what the engine needs to know of them, optionally:

- ``accepts_deadline = True``: ``get_credential(plan, deadline=...)`` bounds itself by that
  ``time.monotonic()`` deadline (the exec provider kills the plugin's process group) and is called
  in the leading thread; any other synchronous provider runs in a thread of its own and is
  abandoned at the deadline.
- ``async def aget_credential(plan)``: asyncio leaders run it in a task on their loop.
- ``call_outcome(plan, error) -> (code, call_status) | None``: KEP-541's labels of
  ``rest_client_exec_plugin_call_total`` for one call of ``plan`` that ended with ``error`` (None
  for a success), or None when the call is not one to count there. The provider kind knows its exit
  codes; a provider without the method (every in-process one) is not counted there.

Every provider is called inside :func:`~cpcreds.providers.deadline.fetch_deadline`: what
``cpcreds.sdk.deadline()`` gives it ends a fixed share of the timeout before the engine gives up,
so that the provider's own error, which names what did not answer, is the one callers get.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..credential import Credential, format_rfc3339
from .entries import CredentialStore
from ..errors import CLIENT_INTERNAL_ERROR, CredentialError, PluginOutputError, ProviderError, ProviderTimeout, result_label
from .flight import Flight
from ..providers.deadline import fetch_deadline
from ..providers.hookspecs import Provider
from ..logs import get_logger, redact_text
from ..metrics import Metrics
from ..plan import AccessPlan
from .workers import Workers

if TYPE_CHECKING:  # asyncio is loaded only where a coroutine runs
    import asyncio

__all__ = ["FetchRunner", "call_provider"]

_log = get_logger("cpcreds.engine")


def call_provider(provider: Provider, plan: AccessPlan, deadline: float | None = None) -> Credential:
    """Call a provider once, in this thread, under the deadline of a fetch that the engine ends at
    ``deadline`` (monotonic; default ``plan.timeout`` from now); anything it raises becomes a
    :class:`CredentialError`."""
    try:
        with fetch_deadline(plan.timeout, ends=deadline):
            credential = provider.get_credential(plan)
    except CredentialError:
        raise
    except Exception as exc:  # a third-party provider's bug must not escape as a random type
        error = _provider_bug(exc, plan.provider)
    else:
        if isinstance(credential, Credential):
            return credential
        error = ProviderError(f"returned {type(credential).__name__}, not a Credential", provider=plan.provider)
    raise error  # outside the except block: no __context__ that could carry the provider's data


def _cannot_start(exc: BaseException, provider: str) -> ProviderError:
    error = ProviderError(f"cannot start the fetch: {type(exc).__name__}: {exc}", provider=provider)
    error.call_status = CLIENT_INTERNAL_ERROR
    return error


def _provider_bug(exc: BaseException, provider: str) -> ProviderError:
    return ProviderError(redact_text(f"{type(exc).__name__}: {exc}"), provider=provider)


class FetchRunner:
    """Runs the fetches of one engine (see the module docstring). Thread-safe."""

    def __init__(self, store: CredentialStore, providers: Mapping[str, Any], workers: Workers, metrics: Metrics) -> None:
        self.store = store
        self.providers = providers
        self.workers = workers
        self.metrics = metrics
        # Tasks running async providers; held here because the loop keeps only weak references.
        self.tasks: set[asyncio.Task[None]] = set()
        self._lock = threading.Lock()
        self._outcome_labels = {name: getattr(p, "call_outcome", None) for name, p in providers.items()}
        self._metric_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._exec_call_children: dict[tuple[int, str], Any] = {}  # (code, call_status) -> counter

    # -- where a fetch runs ------------------------------------------------------------------

    def start(self, plan: AccessPlan, flight: Flight, deadline: float) -> None:
        """Start a fetch led by an asyncio caller, off that caller's task."""
        provider = self.providers.get(plan.provider)
        try:
            if inspect.iscoroutinefunction(getattr(provider, "aget_credential", None)):
                import asyncio  # loaded already: an asyncio caller is running

                task = asyncio.get_running_loop().create_task(self._afetch(provider, plan, flight, deadline))
                with self._lock:
                    self.tasks.add(task)
                task.add_done_callback(self._forget_task)
            else:
                self._run_off_thread(provider, plan, flight, deadline, False)
        except Exception as exc:  # no thread to be had: the flight must not stay open forever
            self._publish(plan, flight, None, _cannot_start(exc, plan.provider), 0.0, False)

    def refresh(self, plan: AccessPlan, flight: Flight) -> None:
        """Run a fetch nobody waits for (refresh ahead of expiry) in a pool thread."""
        try:
            self._run_off_thread(self.providers.get(plan.provider), plan, flight, time.monotonic() + plan.timeout, True)
        except Exception as exc:  # no thread to be had: the flight must not stay open forever
            self._publish(plan, flight, None, _cannot_start(exc, plan.provider), 0.0, True)

    def _run_off_thread(self, provider: Any, plan: AccessPlan, flight: Flight, deadline: float, background: bool) -> None:
        """A fetch off the caller's thread: an in-process call started at once where a slot is
        free (no thread leads it: Workers.start), else led by a pool thread (:meth:`fetch`)."""
        if provider is not None and not getattr(provider, "accepts_deadline", False):
            started = time.perf_counter()

            def done(credential: Credential | None, error: CredentialError | None) -> None:
                try:
                    if credential is not None:
                        self._check_fresh(plan, credential)
                except CredentialError as exc:
                    credential, error = None, exc
                except Exception as exc:  # our own bug: waiters must never hang on a lost flight
                    credential, error = None, _provider_bug(exc, plan.provider)
                self._publish(plan, flight, credential, error, time.perf_counter() - started, background)

            if self.workers.start(plan.key, plan.provider, lambda: call_provider(provider, plan, deadline), deadline, plan.timeout, done):
                return
        self.workers.spawn(self._fetch_in_thread, plan, flight, deadline, background)

    def _forget_task(self, task: asyncio.Task[None]) -> None:
        with self._lock:
            self.tasks.discard(task)

    def _fetch_in_thread(self, plan: AccessPlan, flight: Flight, deadline: float, background: bool) -> None:
        try:
            self.fetch(plan, flight, deadline, background)
        except BaseException:  # noqa: BLE001 - SystemExit in a worker: the flight is already abandoned
            pass

    # -- one fetch ---------------------------------------------------------------------------

    def fetch(self, plan: AccessPlan, flight: Flight, deadline: float, background: bool = False) -> None:
        """Run the provider once, in this thread, and publish the outcome.

        ``KeyboardInterrupt`` and ``SystemExit`` abandon the flight (waiters start over; nothing
        is cached, no backoff) and propagate to this thread's caller."""
        started = time.perf_counter()
        try:
            self.workers.acquire(plan.provider, deadline)
            try:
                credential = self._call(plan, deadline)
            finally:
                self.workers.release(plan.provider)
            self._check_fresh(plan, credential)
        except CredentialError as exc:
            self._publish(plan, flight, None, exc, time.perf_counter() - started, background)
        except Exception as exc:  # our own bug: waiters must never hang on a lost flight
            self._publish(plan, flight, None, _provider_bug(exc, plan.provider), time.perf_counter() - started, background)
        except BaseException:
            self.store.abandon(plan, flight)
            raise
        else:
            self._publish(plan, flight, credential, None, time.perf_counter() - started, background)

    async def _afetch(self, provider: Any, plan: AccessPlan, flight: Flight, deadline: float) -> None:
        """As :meth:`fetch`, in a task of its own, for a provider with ``async def aget_credential``."""
        import asyncio  # loaded already: this runs on an event loop

        started = time.perf_counter()
        try:
            with fetch_deadline(plan.timeout, ends=deadline):  # the task wait_for makes copies this context
                result = await asyncio.wait_for(provider.aget_credential(plan), max(0.0, deadline - time.monotonic()))
            if not isinstance(result, Credential):
                raise ProviderError(f"returned {type(result).__name__}, not a Credential", provider=plan.provider)
            self._check_fresh(plan, result)
        except asyncio.TimeoutError:
            error: CredentialError = ProviderTimeout(f"did not answer within {plan.timeout:g}s", provider=plan.provider)
        except CredentialError as exc:
            error = exc
        except asyncio.CancelledError:  # the loop is shutting down: nobody's failure
            self.store.abandon(plan, flight)
            raise
        except Exception as exc:
            error = _provider_bug(exc, plan.provider)
        except BaseException:
            self.store.abandon(plan, flight)
            raise
        else:
            self._publish(plan, flight, result, None, time.perf_counter() - started, False)
            return
        self._publish(plan, flight, None, error, time.perf_counter() - started, False)

    def _call(self, plan: AccessPlan, deadline: float) -> Credential:
        provider = self.providers.get(plan.provider)
        if provider is None:
            raise CredentialError(f"provider {plan.provider}: not in this engine's config")
        if getattr(provider, "accepts_deadline", False):
            return provider.get_credential(plan, deadline=deadline)  # type: ignore[no-any-return]
        # An in-process provider cannot be killed; it is waited for until the deadline.
        return self.workers.call(plan.key, plan.provider, lambda: call_provider(provider, plan, deadline), deadline, plan.timeout)

    def _check_fresh(self, plan: AccessPlan, credential: Credential) -> None:
        """An answer that has already expired is a failure (with backoff), not a credential."""
        expiry = credential.expiration_timestamp
        if expiry is None or expiry.timestamp() > self.store.clock():
            return
        reason = f"answered a credential that expired at {format_rfc3339(expiry)}"
        if plan.exec is not None:
            raise PluginOutputError(f"exec: {plan.exec.command} {reason}", provider=plan.provider, exit_code=0)
        raise ProviderError(reason, provider=plan.provider)

    # -- its outcome -------------------------------------------------------------------------

    def _publish(
        self, plan: AccessPlan, flight: Flight, credential: Credential | None, error: CredentialError | None, duration: float, background: bool
    ) -> None:
        """Store the outcome of one fetch, count it, and wake everyone waiting on ``flight``."""
        outcome = self.store.publish(plan, flight, credential, error)
        if outcome is None:  # the engine closed and released the waiters; count nothing
            return
        cached, old, failures = outcome
        self._record(plan, error, duration)
        if credential is not None:
            if cached and (credential.certificate_not_after is not None or (old is not None and old.certificate_not_after is not None)):
                self._note_certificate(plan, old, credential)  # tokens alone have nothing to track
            flight.succeed(credential)
        else:
            assert error is not None
            # A caller waiting on this flight gets the error itself; only a background refresh,
            # which nobody waits for, needs the log to be seen.
            log = _log.warning if background else _log.debug
            log("credential fetch failed", provider=plan.provider, error=str(error), failures=failures, background=background)
            flight.fail(error)

    def _record(self, plan: AccessPlan, error: CredentialError | None, duration: float) -> None:
        metrics = self.metrics
        result = "success" if error is None else result_label(error)
        children = self._metric_children.get((plan.provider, result))
        if children is None:  # labels() costs a lock and a tuple per call; look them up once
            children = (metrics.request_duration.labels(plan.provider), metrics.requests.labels(plan.provider, result))
            self._metric_children[(plan.provider, result)] = children
        children[0].observe(duration)
        children[1].inc()
        classify = self._outcome_labels.get(plan.provider)
        labels = classify(plan, error) if classify is not None else None
        if labels is None:
            return
        calls = self._exec_call_children.get(labels)
        if calls is None:
            calls = self._exec_call_children[labels] = metrics.exec_plugin_calls.labels(str(labels[0]), labels[1])
        calls.inc()

    def _note_certificate(self, plan: AccessPlan, old: Credential | None, new: Credential) -> None:
        """Track the new certificate's expiry (or forget the old one's) and its rotation; called
        when either credential holds a certificate."""
        self.metrics.track_certificate(id(self.store), plan.key, new.certificate_not_after)
        if old is not None and old.client_certificate_data and old.client_certificate_data != new.client_certificate_data:
            self.metrics.observe_rotation(old.certificate_not_before)

    # -- the end -----------------------------------------------------------------------------

    def close(self) -> list[asyncio.Task[None]]:
        """Refuse new slots and cancel the async-provider tasks: the tasks, for a caller that
        waits for its loop's ones."""
        self.workers.close()
        with self._lock:
            tasks = list(self.tasks)
        for task in tasks:
            try:
                task.get_loop().call_soon_threadsafe(task.cancel)
            except RuntimeError:  # its loop is closed; the task is gone with it
                pass
        return tasks
