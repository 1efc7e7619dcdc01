"""ssl.principal.mapping.rules: Kafka's SslPrincipalMapper, sans-IO.

The rules map an mTLS client's subject DN (RFC 2253, as Java's X500Principal.getName() writes it, e.g.
``CN=alice,OU=Eng,O=Acme,C=US``) to the principal name. A comma-separated list of ``DEFAULT`` (the DN
itself) and ``RULE:pattern/replacement/[L|U]``; the first rule whose pattern matches the whole DN gives
the name (the replacement applied as Java's String.replaceAll does, then lower- or upper-cased). No rule
matching is an authentication failure, as in Kafka's DefaultKafkaPrincipalBuilder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Kafka's SslPrincipalMapper.RULE_PATTERN and RULE_SPLITTER, unchanged (Java and Python read them alike).
_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)


class NoMatchingRule(ValueError):
    """No rule applies to the DN (Kafka: the connection fails authentication)."""


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(lambda m: _java_replacement(self.replacement, m), dn)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


class PrincipalMapper:
    """The parsed rules; ``name(dn)`` is the principal name Kafka would give the certificate."""

    def __init__(self, rules: str) -> None:
        self.rules = [rule for text in _split(rules) if (rule := _parse(text)) is not None]

    def name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}")


def _split(rules: str) -> list[str]:
    return [m.group(1) for m in _RULE_SPLITTER.finditer(rules.strip())]


def _parse(text: str) -> _Rule | None:
    """One rule; ValueError as Kafka's IllegalArgumentException ("Invalid rule: ..."); empty rules are skipped."""
    match = _RULE_PARSER.match(text)
    if match is None or match.end() != len(text):
        raise ValueError(f"Invalid rule: `{text}`" + (f", unmatched substring: `{text[match.end():]}`" if match else ""))
    if match.group(1) is not None:
        return _Rule(None)
    if match.group(2) is None:
        return None
    try:
        pattern = re.compile(match.group(2))
    except re.error as exc:
        raise ValueError(f"Invalid rule: `{text}`: {exc}") from None
    return _Rule(pattern, match.group(4), match.group(6))


def _java_replacement(replacement: str, match: re.Match[str]) -> str:
    """Java's Matcher.appendReplacement: ``\\c`` is a literal c, ``$n`` a group (digits read while the number
    stays a group); Kafka first turns references to groups that do not exist into literals."""
    groups = len(match.groups())
    out: list[str] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            j = i + 2
            ref = int(replacement[i + 1])
            if ref > groups and groups > 0:  # Kafka's escapeLiteralBackReferences: "$4" with 3 groups is literal
                out.append("$")
                i += 1
                continue
            while j < len(replacement) and replacement[j].isdigit() and ref * 10 + int(replacement[j]) <= groups:
                ref = ref * 10 + int(replacement[j])
                j += 1
            if ref > groups:
                raise ValueError(f"No group {ref}")
            out.append(match.group(ref) or "")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)
