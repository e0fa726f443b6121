"""What a failed pipeline tells its user: one line, the cause, and where in the SQL.

Spark reports a failure with layers around it: py4j's proxy, Python
tracebacks, the JVM's stack, the query's plan and, for a streaming query, a
dump of the query. :func:`root_message` digs out the one line that says what
happened: a UDF's failure, a connector's message (written for the user), a
Spark error class (``[DATATYPE_MISMATCH…] Cannot resolve …``) or the Python
exception. :func:`locate_in_sql` then looks for the expression Spark quotes
in the pipeline's own SQL, so the line can carry a line and column.
"""

from __future__ import annotations

import re

from spate.engine.connectors import ConnectorError
from spate.engine.udf import failure_message

#: A Spark error class at the start of its message: ``[UNRESOLVED_COLUMN.WITH_…] …``.
_ERROR_CLASS = re.compile(r"\[[A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*\] .*")
#: What Spark appends to a message: its SQLSTATE and the position in its own SQL.
_SPARK_SUFFIX = re.compile(r"(\s*SQLSTATE: \w+)?(;\s*line \d+ pos \d+)?;?\s*$")
#: Fragments Spark quotes: "array_max(bid)", `price`. Every quoted span is matched, however
#: short, so a one-letter name (`c` in `a`, `b`) never pairs the quotes around its neighbours.
_QUOTED = re.compile(r'"([^"\n]{1,200})"|`([^`\n]{1,200})`')
#: The shortest fragment worth looking for: shorter ones appear anywhere.
_MIN_DOUBLE_QUOTED, _MIN_BACKTICKED = 3, 2


def connector_error_names() -> list[str]:
    """ConnectorError and its subclasses (egress refusals, path escapes …): messages
    written for the user, whichever of them a Python worker raised."""
    found, pending = [], [ConnectorError]
    while pending:
        cls = pending.pop()
        found.append(cls.__name__)
        pending.extend(cls.__subclasses__())
    return found


def root_message(error: Exception) -> str:
    """The one line of a Spark failure that says what went wrong."""
    text = getattr(error, "desc", None) or str(error)
    # A streaming query's failure ends with a dump of the query and its plan: never the
    # cause, and nothing a user can act on.
    text = text.split("\n=== Streaming Query ===", 1)[0]
    udf_failure = failure_message(text)  # a UDF raised: its name and traceback
    if udf_failure is not None:
        return udf_failure
    for name in (*connector_error_names(), "PipelineFailedError"):
        marker = f"{name}: "
        if marker in text:
            return text.split(marker, 1)[1].splitlines()[0]
    for line in text.splitlines():
        found = _ERROR_CLASS.search(line)
        if found is not None:
            return _SPARK_SUFFIX.sub("", found.group(0))
    if "Traceback (most recent call last)" in text:
        # A Python error inside foreachBatch: its last line names the exception.
        raised = [line.strip() for line in text.splitlines()
                  if line.strip() and not line.startswith((" ", "\t", "+-", "'"))]
        return raised[-1] if raised else text.splitlines()[0]
    return text.splitlines()[0] if text else repr(error)


def locate_in_sql(sql: str, message: str) -> tuple[int, int] | None:
    """Line and column (1-based) in ``sql`` of an expression ``message`` quotes, when one
    is found there; the longest quoted fragment that appears wins. Spark quotes types in
    capitals (``"ARRAY"``), so only fragments with a lower-case letter are expressions."""
    fragments = sorted({a or b for a, b in _QUOTED.findall(message)
                        if len(a) >= _MIN_DOUBLE_QUOTED or len(b) >= _MIN_BACKTICKED},
                       key=len, reverse=True)
    lowered = sql.lower()
    for fragment in fragments:
        if not re.search(r"[a-z]", fragment):
            continue
        tokens = re.findall(r"\w+|[^\w\s]", fragment.lower())
        found = re.search(r"\s*".join(re.escape(token) for token in tokens), lowered)
        if found is not None:
            before = sql[:found.start()]
            return before.count("\n") + 1, found.start() - (before.rfind("\n") + 1) + 1
    return None
