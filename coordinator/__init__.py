"""Group coordinator: classic consumer-group membership and committed offsets on ``__consumer_offsets``, plus producer ids.

Sans-IO: state machines driven by calls and a ``now_ms`` clock. Entry points:
``group_coordinator.GroupCoordinator`` (requests answer through ``respond`` callbacks; ``tick`` runs timers), a
facade over ``membership`` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, rebalances), ``offsets`` (committed and
transactional offsets) and ``group_admin`` (DescribeGroups, ListGroups, DeleteGroups), which share a
``group_cache.GroupCache``; ``offsets_log.OffsetsLog`` (the persistence the gateway provides), ``results``
(request/response types), ``producer_ids.ProducerIdManager``; transactions: ``txn_coordinator.TransactionCoordinator``
(its states in ``txn_metadata``, its ``__transaction_state`` records in ``txn_schema``).
"""
