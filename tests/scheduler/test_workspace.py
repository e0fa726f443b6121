"""Which connection tables a job's spec carries: only those its SQL names."""

from __future__ import annotations

from scheduler.workspace import named_tables

TABLES = [{"name": "orders", "connector": "single_file"},
          {"name": "payments", "connector": "single_file"},
          {"name": "Audit", "connector": "blackhole"}]


def test_only_tables_the_sql_names_are_kept() -> None:
    sql = "INSERT INTO audit SELECT * FROM orders WHERE note <> 'payments_x'"
    assert [t["name"] for t in named_tables(sql, TABLES)] == ["orders", "Audit"]


def test_a_name_inside_a_longer_word_does_not_count() -> None:
    assert named_tables("SELECT orders_total FROM x", TABLES) == []
