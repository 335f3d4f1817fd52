"""Kafka's `sasl.jaas.config` value: one JAAS login module entry,

    org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b";

read into (module class, {option: value}). Used by the broker (its listeners' users and its
own login to other brokers) and by every client of Samsa's (tools, the Spark data source).
Error messages never quote the text: it holds passwords."""

from __future__ import annotations

import re

_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_MODULE = re.compile(r"\s*([A-Za-z0-9_.$]+)\s+(required|requisite|sufficient|optional)\s*")


class JaasError(ValueError):
    pass


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """(login module class, {option: value}); JaasError if `text` is not one entry."""
    m = _MODULE.match(text)
    if m is None:
        raise JaasError("sasl.jaas.config: expected '<LoginModule> required key=\"value\" ...;'")
    pos = m.end()
    options: dict[str, str] = {}
    while True:
        o = _OPTION.match(text, pos)
        if o is None:
            break
        options[o.group(1)] = re.sub(r"\\(.)", r"\1", o.group(2))
        pos = o.end()
    rest = text[pos:].strip()
    if rest != ";":
        where = f"after option {list(options)[-1]!r}" if options else "after the login module's flag"
        raise JaasError(f"sasl.jaas.config: cannot read what comes {where} (options are key=\"value\", and the "
                        "entry ends with ';')")
    return m.group(1), options
