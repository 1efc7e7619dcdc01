"""What one ACL check costs (server/security/authorizer.py), and that it does not grow with the number of ACLs.

    .venv/bin/python -m bench.authorizer

Builds authorizers holding 10, 1000 and 100000 ACLs (literal and prefixed, over topics, groups and many
principals) and times ``authorize`` for a topic matched by a prefix, by a literal, and by nothing (best of 5
runs of 20000 calls each), in-process.
"""

from __future__ import annotations

import timeit

from logway.server.security.authorizer import AclBinding, Authorizer, Operation, PatternType, Permission, ResourceType

T, G = int(ResourceType.TOPIC), int(ResourceType.GROUP)


def _authorizer(count: int) -> Authorizer:
    authorizer = Authorizer()
    for i in range(count):
        kind = T if i % 3 else G
        pattern = int(PatternType.PREFIXED) if i % 2 else int(PatternType.LITERAL)
        name = f"team{i % 97}-app{i}-" if pattern == PatternType.PREFIXED else f"team{i % 97}-topic{i}"
        authorizer.add(AclBinding(kind, name, pattern, f"User:u{i % 500}", "*", int(Operation.READ), int(Permission.ALLOW)))
    authorizer.add(AclBinding(T, "orders-", int(PatternType.PREFIXED), "User:alice", "*", int(Operation.READ),
                              int(Permission.ALLOW)))
    authorizer.add(AclBinding(T, "orders-eu", int(PatternType.LITERAL), "User:alice", "*", int(Operation.WRITE),
                              int(Permission.DENY)))
    return authorizer


def main() -> None:
    checks = {"prefix match": "orders-eu", "literal match": "orders-eu", "no ACL": "unrelated-topic"}
    print(f"{'ACLs':>8} {'check':<14} {'µs/check':>9}")
    for count in (10, 1000, 100000):
        authorizer = _authorizer(count)
        for label, topic in checks.items():
            op = Operation.READ if label == "prefix match" else Operation.WRITE
            timer = timeit.Timer(lambda a=authorizer, t=topic, o=op: a.authorize("User:alice", "10.0.0.1", o, T, t))
            best = min(timer.repeat(5, 20000)) / 20000
            print(f"{count:>8} {label:<14} {best * 1e6:>9.2f}")


if __name__ == "__main__":
    main()
