"""The API versions the proxy advertises: the upstream's ranges, cut to what the proxy can serve.

An API is advertised when kio knows it (the proxy must be able to read its headers' flexibility, and decode
it if a rewrite or a filter needs the body) and the proxy may forward it: APIs that carry broker addresses
the proxy does not rewrite (DescribeQuorum, the Raft voter APIs), inter-broker and controller APIs (the share
coordinator's state APIs among them), and the SASL exchange (which ends at the proxy's own listener) are never
forwarded. Share groups are (ShareFetch/ShareAcknowledge node_endpoints are rewritten, proxy/rewrite.py).
Each range is the intersection of the upstream's and kio's; ApiVersions itself is the proxy's own.
An API key the proxy does not know is not advertised; a request for it closes the connection.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import cache

from kio.schema.index import api_key_map

from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

API_VERSIONS = 18
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
API_VERSIONS_RANGE = (0, 4)

# Never forwarded (see the module docstring): SASL (ends at the proxy), controller/Raft/inter-broker APIs,
# and APIs whose responses carry addresses the proxy does not rewrite.
NOT_FORWARDED = frozenset({
    SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS,
    4, 5, 6, 7,  # LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown
    27,  # WriteTxnMarkers (broker to broker)
    52, 53, 54, 55, 59,  # Vote, BeginQuorumEpoch, EndQuorumEpoch, DescribeQuorum, FetchSnapshot
    56, 58, 62, 63, 64, 67, 70, 73,  # AlterPartition, Envelope, broker/controller registration, ...
    83, 84, 85, 86, 87,  # the share coordinator's state APIs (broker to broker)
    80, 81, 82,  # Add/Remove/UpdateRaftVoter
})

Ranges = dict[int, tuple[int, int]]


@cache
def kio_range(api_key: int) -> tuple[int, int] | None:
    """The versions kio can read and write for ``api_key`` (None if it knows none): its schema package's
    ``v<N>`` modules, listed without importing them (importing every schema takes about a second)."""
    name = api_key_map.get(api_key)
    if name is None:
        return None
    try:
        package = importlib.import_module(f"kio.schema.{name}")
    except ImportError:
        return None
    versions = [int(m.name[1:]) for m in pkgutil.iter_modules(package.__path__) if re.fullmatch(r"v\d+", m.name)]
    return (min(versions), max(versions)) if versions else None


def advertised_ranges(upstream: Ranges, sasl: Ranges | None = None, caps: dict[int, int] | None = None) -> Ranges:
    """What the proxy tells clients: the forwardable part of ``upstream`` (each API at most its version in
    ``caps``), ApiVersions, and (on a SASL listener) the proxy's own SaslHandshake/SaslAuthenticate ranges."""
    out: Ranges = {API_VERSIONS: API_VERSIONS_RANGE}
    for key, (lo, hi) in upstream.items():
        if key in NOT_FORWARDED or key not in api_key_map:
            continue
        known = kio_range(key)
        if known is None:
            continue
        low, high = max(lo, known[0]), min(hi, known[1], (caps or {}).get(key, hi))
        if low <= high:
            out[key] = (low, high)
    out.update(sasl or {})
    return dict(sorted(out.items()))


def api_versions_response(version: int, ranges: Ranges, error: ErrorCode = ErrorCode.none):
    """The kio ApiVersions response of ``version`` listing ``ranges``."""
    keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in ranges.items()]
    return build(response_type(API_VERSIONS, version), {"error_code": error, "api_keys": keys, "throttle_time": 0})


def parse_ranges(response) -> Ranges:
    """The ranges of an upstream ApiVersions response."""
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
