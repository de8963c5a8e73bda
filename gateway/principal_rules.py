"""Kafka's ssl.principal.mapping.rules: from a client certificate's distinguished name to the
name in its principal ("User:<name>").

    RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/L,DEFAULT

Rules are tried in order; a RULE whose pattern matches the whole name gives its replacement
($1 for the first group; L or U after the last slash lower- or upper-cases the result);
DEFAULT gives the name unchanged. A name no rule matches has no principal: the connection is
refused, as Kafka refuses it. A slash or backslash inside a pattern or replacement is escaped
with a backslash. The default is "DEFAULT".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# One rule and the separator after it, as Kafka's SslPrincipalMapper reads the list.
_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")


class NoMatchingRule(ValueError):
    """No rule maps this name."""


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    template: str = ""  # the replacement, as re.Match.expand takes it
    case: str = ""  # "L", "U" or ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        match = self.pattern.fullmatch(name)
        if match is None:
            return None
        mapped = match.expand(self.template)
        return mapped.lower() if self.case == "L" else mapped.upper() if self.case == "U" else mapped


def parse_rules(text: str) -> tuple[Rule, ...]:
    """The rules of a setting; ValueError naming the part that is not one."""
    rules = []
    at = 0
    text = text.strip()
    while at < len(text):
        found = _RULE.match(text, at)
        if found is None or found.end() == at:
            raise ValueError(f"ssl.principal.mapping.rules: {text[at:]!r} is not DEFAULT or RULE:pattern/replacement/[LU]")
        default, pattern, replacement, case = found.groups()
        if default:
            rules.append(Rule(None))
        else:
            try:
                compiled = re.compile(pattern)
            except re.error as error:
                raise ValueError(f"ssl.principal.mapping.rules: pattern {pattern!r}: {error}") from None
            rules.append(Rule(compiled, _template(replacement), case))
        at = found.end()
    if not rules:
        raise ValueError("ssl.principal.mapping.rules: no rule (DEFAULT keeps the name as it is)")
    return tuple(rules)


def mapped(rules: tuple[Rule, ...], name: str) -> str:
    """The first rule's mapping of `name`; NoMatchingRule if none maps it."""
    for rule in rules:
        result = rule.apply(name)
        if result is not None:
            return result
    raise NoMatchingRule(f"no ssl.principal.mapping.rules rule maps {name!r}")


def _template(replacement: str) -> str:
    """Java's replacement syntax ($1, ${name}, \\ escapes) as Python's (\\g<1>, \\g<name>)."""
    out = []
    at = 0
    while at < len(replacement):
        char = replacement[at]
        if char == "\\" and at + 1 < len(replacement):
            literal = replacement[at + 1]
            out.append("\\\\" if literal == "\\" else literal)
            at += 2
            continue
        if char == "$":
            group = re.match(r"\$(\d+|\{\w+\})", replacement[at:])
            if group is None:
                raise ValueError(f"ssl.principal.mapping.rules: {replacement!r}: '$' names no group")
            out.append(f"\\g<{group.group(1).strip('{}')}>")
            at += group.end()
            continue
        out.append(char)
        at += 1
    return "".join(out)
