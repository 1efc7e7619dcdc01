"""KIP-848 regex subscriptions: RE2J patterns, checked and matched with Python's ``re``.

Kafka compiles a member's ``SubscribedTopicRegex`` with Google's RE2J and subscribes it to every topic the
pattern matches in full (``Pattern.matcher(name).matches()``). RE2J and Python's ``re`` agree on the common
syntax (literals, ``.``, classes, ``\\d \\w \\s \\b``, anchors, groups, alternation, greedy and lazy
repetition, ``(?i)``-style flags) and, both matching leftmost-first, on what it matches. They differ on:

- constructs Python accepts and RE2J refuses: backreferences (``\\1``, ``(?P=name)``), lookaround
  (``(?=``, ``(?!``, ``(?<=``, ``(?<!``), atomic groups ``(?>``, possessive quantifiers (``*+``, ``++``,
  ``?+``, ``}+``), conditionals ``(?(``, comments ``(?#``, the ``x``/``a``/``L`` flags, ``\\Z``, and
  repetition counts above 1000;
- constructs RE2J accepts and Python reads differently or refuses: POSIX classes ``[[:alpha:]]``, Unicode
  classes ``\\pL``/``\\p{Greek}``, ``\\Q...\\E`` quoting, ``\\z``, ``\\x{10FFFF}``, ``\\C``, the ungreedy
  ``(?U)`` flag, octal ``\\123``, and named groups written ``(?<name>``;
- ``\\d``, ``\\w``, ``\\s`` and ``\\b`` are ASCII in RE2J: the pattern is compiled with ``re.ASCII``.

A pattern using any construct of the first two lists is refused with INVALID_REGULAR_EXPRESSION (the first
list because Kafka refuses it too, the second because Python would not match it the same way), so every
pattern Logway accepts matches exactly the topics Kafka's would. Topic names are ASCII letters, digits,
``.``, ``_`` and ``-``, so the remaining differences (``$`` before a trailing newline, Unicode case
folding) cannot show.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

__all__ = ["InvalidRegex", "compile_topic_regex", "matching_topics"]

MAX_REPEAT = 1000  # RE2's limit on {n,m} counts

# Outside a character class: the escapes and group openers neither engine reads the same way.
_REFUSED = re.compile(
    r"""\\(?:[1-9]|0[0-7]|[QEpPzZCG]|x\{)      # backreferences, octal, \Q..\E, \p, \z, \Z, \C, \G, \x{..}
      | \(\?(?:[=!>#(]|<[=!]|<[A-Za-z_]|P[=>])  # lookaround, atomic, comment, conditional, <name>, P=, P>
      | \(\?[a-zA-Z-]*[xaLU]                     # flags only one engine knows
      | (?:[*+?]|\})\+                           # possessive quantifiers
    """,
    re.VERBOSE,
)
_COUNT = re.compile(r"\{(\d+)(?:,(\d*))?\}")


class InvalidRegex(ValueError):
    """A pattern Kafka (RE2J) would refuse, or one Python's ``re`` would not match as RE2J does."""


def _outside_classes(pattern: str) -> str:
    """The pattern with each character class replaced by ``[]`` (escapes outside classes kept whole), so the
    checks below see only what is outside classes; a POSIX class inside one is refused here."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            out.append(pattern[i:i + 2])
            i += 2
        elif c == "[":
            i = _skip_class(pattern, i)
            out.append("[]")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _skip_class(pattern: str, start: int) -> int:
    """The index after the character class opening at ``start``."""
    i = start + 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):  # a leading ] is a literal
        i += 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
        elif pattern.startswith("[:", i):
            raise InvalidRegex(f"POSIX character class at position {i} (RE2J syntax Python reads differently)")
        elif pattern[i] == "]":
            return i + 1
        else:
            i += 1
    raise InvalidRegex(f"missing closing ] for the class at position {start}")


@lru_cache(maxsize=1024)
def compile_topic_regex(pattern: str) -> re.Pattern[str]:
    """The compiled pattern, or InvalidRegex naming what RE2J and ``re`` disagree on."""
    bare = _outside_classes(pattern)
    refused = _REFUSED.search(bare)
    if refused is not None:
        raise InvalidRegex(f"{refused.group(0)!r} at position {refused.start()} is not RE2J syntax that "
                           "Python's re matches the same way")
    for count in _COUNT.finditer(bare):
        if any(int(n) > MAX_REPEAT for n in count.groups() if n):
            raise InvalidRegex(f"repetition count {count.group(0)} above RE2's limit of {MAX_REPEAT}")
    try:
        return re.compile(pattern, re.ASCII)
    except (re.error, RecursionError, OverflowError) as exc:
        raise InvalidRegex(str(exc)) from None


def matching_topics(pattern: str, names: Iterable[str]) -> frozenset[str]:
    """The topics ``pattern`` matches in full (Kafka's TopicRegexResolver), or InvalidRegex."""
    compiled = compile_topic_regex(pattern)
    return frozenset(name for name in names if compiled.fullmatch(name))
