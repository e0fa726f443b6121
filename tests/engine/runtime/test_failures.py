"""A failed pipeline's message: one line with the cause, and where in the SQL."""

from __future__ import annotations

from spate.engine.runtime.failures import locate_in_sql, root_message

ANALYSIS = (
    "An exception was raised by the Python Proxy. Return Message: Traceback (most recent "
    "call last):\n  File \"runner.py\", line 291, in _epoch\n    report = self._run()\n"
    "pyspark.errors.exceptions.captured.AnalysisException: [DATATYPE_MISMATCH.UNEXPECTED_"
    "INPUT_TYPE] Cannot resolve \"array_max(bid)\" due to data type mismatch: The first "
    "parameter requires the \"ARRAY\" type. SQLSTATE: 42K09; line 1 pos 7;\n"
    "'Project [array_max(bid#2) AS m#24]\n+- SubqueryAlias nexmark\n"
    "   +- View (`nexmark`, [person#0, auction#1, bid#2])\n"
    "\n=== Streaming Query ===\nIdentifier: spate-p\nCurrent State: ACTIVE\n"
    "+- ~Project [id#0L, amount#1]\n")
CONNECTOR = ("Traceback (most recent call last):\n  File \"x.py\", line 1\n"
             "spate.engine.connectors.core.egress.EgressDeniedError: cannot connect to db:5432: "
             "the destination is unreachable or not allowed\n\n=== Streaming Query ===\n"
             "+- ~Project [x#1]\n")
PYTHON = ("Traceback (most recent call last):\n  File \"x.py\", line 3, in f\n"
          "    return 1 / 0\nZeroDivisionError: division by zero\n"
          "\n=== Streaming Query ===\n+- ~Project [x#1]\n")


def test_the_spark_error_class_line_is_the_message_never_the_plan() -> None:
    message = root_message(Exception(ANALYSIS))
    assert message.startswith("[DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE] Cannot resolve")
    assert "SQLSTATE" not in message and "Project" not in message and "+-" not in message


def test_a_connector_message_is_kept_as_written() -> None:
    assert root_message(Exception(CONNECTOR)) == (
        "cannot connect to db:5432: the destination is unreachable or not allowed")


def test_a_python_error_is_its_exception_line() -> None:
    assert root_message(Exception(PYTHON)) == "ZeroDivisionError: division by zero"


def test_the_quoted_expression_is_found_in_the_pipeline() -> None:
    sql = ("CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '10');\n"
           "SELECT bid.price,\n       ARRAY_MAX( bid ) AS m FROM nexmark;\n")
    assert locate_in_sql(sql, root_message(Exception(ANALYSIS))) == (3, 8)
    assert locate_in_sql(sql, 'Cannot resolve "nothing_like_it(x)"') is None


def test_one_letter_names_are_not_paired_with_their_neighbours_quotes() -> None:
    sql = ("CREATE TABLE a (id BIGINT, info STRUCT<a BIGINT, b TEXT>)\n"
           "WITH (connector = 'single_file', path = 'in.jsonl', format = 'json');\n"
           "SELECT s.c FROM (SELECT info AS s FROM a);\n")
    # Read pairwise from the first backtick, "` in `" would be a fragment, found in "BIGINT".
    assert locate_in_sql(sql, "[FIELD_NOT_FOUND] No such struct field `c` in `a`, `b`.") is None
    assert locate_in_sql(sql, "No such struct field `cc` in `info`, `b`.") == (1, 28)
