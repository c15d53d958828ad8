"""Audit: the collaboration log, token accounting, stats, export, the exception policy."""

from teamgraph.audit.log import write_committed
from teamgraph.audit.project import project_name
from teamgraph.audit.records import LINE_RE, LogEvent, format_line, parse_line
from teamgraph.audit.thread_log import flush_log, read_log
from teamgraph.redaction import redact, redact_value

__all__ = [
    "LINE_RE",
    "LogEvent",
    "flush_log",
    "format_line",
    "parse_line",
    "project_name",
    "read_log",
    "redact",
    "redact_value",
    "write_committed",
]
