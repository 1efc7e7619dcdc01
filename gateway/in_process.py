"""An in-process gateway, for tests (the `logway` pytest fixture) and embedding.

The gateway runs its own trio loop in a background thread, on an ephemeral port, with a temporary data
directory; blocking Kafka clients in the test thread talk to it over loopback.
"""

from __future__ import annotations

import threading
from pathlib import Path

import trio

from logway.gateway.broker import Broker
from logway.gateway.config import BrokerConfig
from logway.gateway.run import run_broker
from logway.server.config import Listener
from logway.server.listeners import open_listeners


class InProcessGateway:
    """A gateway on 127.0.0.1:<ephemeral> in a background thread; start() / stop() / restart-able."""

    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.overrides = overrides or {}
        self.port = 0
        self.ports: dict[str, int] = {}  # listener name -> bound port (several listeners: see ``bootstrap_for``)
        self.broker: Broker | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def bootstrap_for(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener.upper()]}"

    def start(self) -> InProcessGateway:
        self._ready.clear()
        self._error = None
        self._thread = threading.Thread(target=self._run, name="logway-gateway", daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise TimeoutError("in-process gateway did not start within 30 s")
        if self._error is not None:
            raise RuntimeError("in-process gateway failed to start") from self._error
        return self

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # surfaced to start()
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        props = {"listeners": f"PLAINTEXT://127.0.0.1:{self.port}", "log.dirs": str(self.data_dir),
                 "group.initial.rebalance.delay.ms": "0", **self.overrides}
        config = BrokerConfig.load(None, props)
        listeners = await open_listeners(config)
        self.ports = {lst.name: bound.socket.getsockname()[1] for lst, bound in reversed(listeners)}
        self.port = listeners[0][1].socket.getsockname()[1]
        config.advertised_listeners = [Listener(lst.name, "127.0.0.1", self.ports[lst.name], lst.protocol)
                                       for lst in config.listeners]
        broker = Broker(config)
        broker.open()
        self.broker = broker
        self._token = trio.lowlevel.current_trio_token()
        try:
            async with trio.open_nursery() as nursery:
                self._cancel = nursery.cancel_scope
                await nursery.start(run_broker, broker, listeners)
                self._ready.set()
        finally:
            broker.close()

    def stop(self) -> None:
        """A clean shutdown (like SIGTERM). The same data dir and port can be started again."""
        if self._thread is None:
            return
        if self._token is not None and self._cancel is not None:
            try:
                trio.from_thread.run_sync(self._cancel.cancel, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(30)
        self._thread = None
