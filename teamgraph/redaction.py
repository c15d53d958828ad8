"""The one redaction: secrets never reach anything teamgraph shows or writes.

Every surface goes through :func:`redact` (or :func:`redact_value` for
structured values): the collaboration log, exports, stats, ``teamgraph threads``,
the resume hints and database labels, and the CLI's error lines. It lives on the
ground floor (it imports nothing of ours) so that every layer can use it.

Two passes: values of keys named like a secret (``password``, ``api_key``,
``token``...) are masked in structured arguments, and free text is scanned for
well-known secret shapes (``sk-...`` and ``sk-ant-...`` keys, ``Bearer`` and
``Basic`` credentials, passwords inside URLs, ``key=value`` pairs, AWS keys,
private-key blocks).
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***"

SECRET_KEY = re.compile(
    r"(pass(word|wd)|pwd|secret|api[_-]?key|access[_-]?key|private[_-]?key|credential|token$|^auth$)", re.IGNORECASE
)
"""A key whose value is a secret, whatever the value looks like."""

# NOTE: order matters: a private-key block spans lines and must go before the
# one-token patterns cut it into pieces.
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL), MASK),
    (re.compile(r"\bBearer\s+[A-Za-z0-9._~+/=-]+", re.IGNORECASE), f"Bearer {MASK}"),
    # NOTE: after "Authorization:" any token; elsewhere only a capitalised "Basic" before a token
    # with a digit or base64 symbol, so that English ("basic understanding") is left alone.
    (re.compile(r"(?i:\b(?P<h>(proxy-)?authorization\s*[:=]\s*basic\s+))[A-Za-z0-9+/=._-]+"), rf"\g<h>{MASK}"),
    (re.compile(r"\bBasic\s+(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2}"), f"Basic {MASK}"),
    # a URL's password: scheme://user:password@host -> scheme://user:***@host
    (re.compile(r"(?P<u>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)[^\s@/]+@"), rf"\g<u>{MASK}@"),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{6,}"), f"sk-{MASK}"),
    (re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"), MASK),
    (re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{20,}|xox[abpr]-[A-Za-z0-9-]{10,})\b"), MASK),
    (
        re.compile(
            # NOTE: the key's prefix is bounded: an unbounded one backtracks quadratically on long words.
            r"""(?<![\w.-])(?P<key>["']?[\w.-]{0,40}(pass(word|wd)?|pwd|secret|token|api[_-]?key|access[_-]?key|credential)"""
            r"""([_-]?(key|value|id))?["']?\s*[:=]\s*)(?P<value>"[^"]*"|'[^']*'|[^\s,;&})\]<>]+)""",
            re.IGNORECASE,
        ),
        rf"\g<key>{MASK}",
    ),
)


_SECRET_MARKS = (
    "begin", "bearer", "basic", "://", "sk-", "akia", "asia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "xox",
    "pass", "pwd", "secret", "token", "api", "access", "credential",
)  # fmt: skip
"""Every pattern's match contains one of these (case-folded): a text with none holds no secret.

NOTE: checked with ``in`` on the case-folded text (which folds what ``re.IGNORECASE``
matches, e.g. a long s), one pass each in C, instead of every pattern's regular
expression on every line the log writes.
"""


def _may_hold_a_secret(text: str) -> bool:
    # NOTE: re.IGNORECASE also matches "i" to the dotless "ı" and the dotted "İ" (which
    # case-folds to "i" plus a combining dot): fold both to "i" too.
    folded = text.casefold().replace("ı", "i").replace("\u0307", "")
    return any(mark in folded for mark in _SECRET_MARKS)


def redact(text: str) -> str:
    """``text`` with every secret it contains masked.

    Args:
        text: Any text (a message, a tool argument, an error).

    Returns:
        The text, secrets replaced by ``***``.
    """
    if not _may_hold_a_secret(text):
        return text
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_value(value: Any) -> Any:
    """A copy of a structured value (tool arguments) with secrets masked.

    Values of keys named like a secret are masked whole; strings anywhere are
    scanned with ``redact``.
    """
    if isinstance(value, dict):
        return {k: MASK if SECRET_KEY.search(str(k)) else redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v) for v in value]
    if isinstance(value, str):
        return redact(value)
    return value


def redact_url(url: str) -> str:
    """``url`` with its password (``user:***@host``) and secret-looking query values masked.

    For messages that name a database or an endpoint (resume hints, connection errors).
    A string that is not a URL with a host comes back unchanged.
    """
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not parts.netloc:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{host}" if colon else netloc
    query = redact(parts.query) if parts.query else parts.query
    return urlunsplit(parts._replace(netloc=netloc, query=query))
