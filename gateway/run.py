"""The broker process: listeners bound before the log is opened, the broker's background work, its
connections (served by the server layer with the broker's API dispatch) and the metrics endpoint, until
SIGTERM/SIGINT; then a clean shutdown."""

from __future__ import annotations

import logging
import signal

import trio

from logway.gateway.broker import Broker
from logway.gateway.config import BrokerConfig
from logway.gateway.dispatch import BrokerHandler
from logway.gateway.metrics.collector import serve_metrics
from logway.server.config import ConfigError, Listener
from logway.server.gc_policy import tune_after_startup
from logway.server.listeners import Server, StartupError, listener_context, open_listeners
from logway.server.metrics_http import open_metrics_listeners
from logway.wire.errors import KafkaError

log = logging.getLogger(__name__)


async def run_broker(
    broker: Broker, listeners: list[tuple[Listener, trio.SocketListener]],
    metrics_listeners: list[trio.SocketListener] | None = None, task_status=trio.TASK_STATUS_IGNORED,
):
    """Serve until cancelled; the caller closes the broker afterwards (a clean shutdown).

    The metrics endpoint (metrics.port) serves ``metrics_listeners``, bound here when not given.
    """
    if metrics_listeners is None:
        metrics_listeners = await open_metrics_listeners(broker.config)
    server = Server(broker.config, broker.stats)
    handler = BrokerHandler(broker)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.run_background)
        await nursery.start(server.run)
        for listener, bound in listeners:
            context = listener_context(broker.config, listener, broker.realm, broker.audit)
            nursery.start_soon(server.accept, context, bound, handler)
        if metrics_listeners:
            await nursery.start(serve_metrics, broker, metrics_listeners)
        task_status.started()


async def serve(config: BrokerConfig) -> None:
    """Run a gateway until SIGTERM or SIGINT, then shut down cleanly (flush, clean-shutdown marker).

    The ports are bound before the log is opened, so a port in use stops start-up before any file is touched.
    """
    listeners = await open_listeners(config)
    try:
        metrics_listeners = await open_metrics_listeners(config)
    except OSError as exc:
        for _, bound in listeners:
            await bound.aclose()
        raise StartupError(f"metrics.port={config.metrics_port}: cannot listen: {exc.strerror or exc}") from exc
    broker = Broker(config)
    try:
        broker.open()
    except (OSError, KafkaError, ConfigError) as exc:  # LogManager.open closed what it had opened
        for bound in [b for _, b in listeners] + metrics_listeners:
            await bound.aclose()
        if isinstance(exc, ConfigError):  # the audit log's file
            raise StartupError(str(exc)) from exc
        raise StartupError(f"log.dirs={','.join(config.log_dirs)}: cannot open the log: {exc}") from exc
    tune_after_startup()
    try:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                await nursery.start(run_broker, broker, listeners, metrics_listeners)
                for listener in config.listeners:
                    log.info("listening on %s (advertised as %s)", listener, config.advertised_for(listener.name))
                if metrics_listeners:
                    log.info("metrics on http://%s:%d/metrics", config.metrics_host or "0.0.0.0", config.metrics_port)
                async for signum in signals:
                    log.info("received %s, shutting down", signal.Signals(signum).name)
                    nursery.cancel_scope.cancel()
                    break
    finally:
        broker.close()
        log.info("shut down cleanly")
