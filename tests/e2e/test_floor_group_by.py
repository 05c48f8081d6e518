"""Cassandra 5.0's floor() time functions and GROUP BY on a function of the last grouped
clustering column (`GROUP BY k, floor(ts, 1h)`): only monotonic functions (the time
conversions and floor with constant arguments) of one clustering column, and only as the last
GROUP BY element. Groups page like column groups: a page ends between two groups."""

import datetime

import pytest
from cassandra import InvalidRequest
from cassandra.query import SimpleStatement
from cassandra.util import Date, Time

from util import new_table


def ts(hh, mm):
    return datetime.datetime(2020, 1, 1, hh, mm)


@pytest.fixture(scope="module")
def events(cql, test_keyspace):
    """Partition 1: 00:10, 00:50, 01:10, 03:00; partition 2: 00:10."""
    with new_table(cql, test_keyspace, "k int, ts timestamp, v int, PRIMARY KEY (k, ts)") as name:
        for k, (hh, mm), v in [(1, (0, 10), 1), (1, (0, 50), 2), (1, (1, 10), 3), (1, (3, 0), 4),
                               (2, (0, 10), 5)]:
            cql.execute(f"INSERT INTO {name} (k, ts, v) VALUES (%s, %s, %s)", (k, ts(hh, mm), v))
        yield name


@pytest.fixture(scope="module")
def times(cql, test_keyspace):
    """One row with a date, a time and a timeuuid (2015-07-14 00:00:18.805)."""
    schema = "k int, d date, tm time, tu timeuuid, v int, PRIMARY KEY (k, d, tm, tu)"
    with new_table(cql, test_keyspace, schema) as name:
        cql.execute(f"INSERT INTO {name} (k, d, tm, tu, v) VALUES (1, '2020-01-05', "
                    "'10:35:12.5', 50554d6e-29bb-11e5-b345-feff819cdc9f, 1)")
        yield name


def test_floor_of_timestamps(cql, events):
    rs = cql.execute(f"SELECT floor(ts, 1h), floor(ts, 25h), floor(ts, 7d), floor(ts, 1mo1d) "
                     f"FROM {events} WHERE k = 1 LIMIT 1")
    assert rs.column_names[0] == "system.floor(ts, 1h)"
    # Steps count from the Unix epoch (a Thursday); months step on the calendar.
    assert tuple(rs.one()) == (ts(0, 0), datetime.datetime(2019, 12, 31, 11),
                               datetime.datetime(2019, 12, 26), datetime.datetime(2019, 12, 2))


def test_floor_from_a_start_time(cql, events):
    rs = cql.execute(f"SELECT floor(ts, 1h, '2019-12-31 23:30:00+0000') FROM {events} "
                     "WHERE k = 1")
    assert [r[0] for r in rs] == [datetime.datetime(2019, 12, 31, 23, 30), ts(0, 30), ts(0, 30),
                                  ts(2, 30)]
    with pytest.raises(InvalidRequest, match="The floor function starting time is greater than "
                       "the provided time"):
        cql.execute(f"SELECT floor(ts, 1h, '2020-01-01 00:30:00+0000') FROM {events} WHERE k = 1")


def test_floor_of_dates_times_and_timeuuids(cql, times):
    rs = cql.execute(f"SELECT floor(d, 3d), floor(d, 1mo), floor(tm, 7m), floor(tm, 1500us), "
                     f"floor(tu, 1h), floor(tu, 1d, '2015-07-13 12:00') FROM {times} WHERE k = 1")
    assert [ct.typename for ct in rs.column_types] == ["date", "date", "time", "time",
                                                       "timestamp", "timestamp"]
    assert tuple(rs.one()) == (
        Date(datetime.date(2020, 1, 3)), Date(datetime.date(2020, 1, 1)),
        Time(37_800_000_000_000), Time(38_112_499_500_000),
        datetime.datetime(2015, 7, 14), datetime.datetime(2015, 7, 13, 12))


@pytest.mark.parametrize("selection, message", [
    ("floor(ts, 1us)", "The floor cannot be computed for the 1us duration as precision is below "
     "1 millisecond"),
    ("floor(toDate(ts), 1h)", "The floor on date values cannot be computed for the 1h duration "
     "as precision is below 1 day"),
    ("floor(ts)", "Invalid call to function floor, none of its type signatures match"),
])
def test_floor_errors(cql, events, selection, message):
    with pytest.raises(InvalidRequest, match=message):
        cql.execute(f"SELECT {selection} FROM {events} WHERE k = 1")


def test_time_floor_needs_a_duration_under_a_day(cql, times):
    with pytest.raises(InvalidRequest, match="For time values, the floor can only be computed "
                       "for durations smaller that a day"):
        cql.execute(f"SELECT floor(tm, 1d) FROM {times} WHERE k = 1")


def test_group_by_floor(cql, events):
    rs = cql.execute(f"SELECT k, floor(ts, 1h), count(*), sum(v) FROM {events} WHERE k = 1 "
                     "GROUP BY k, floor(ts, 1h)")
    assert rs.column_names == ["k", "system.floor(ts, 1h)", "count", "system.sum(v)"]
    assert [tuple(r) for r in rs] == [(1, ts(0, 0), 2, 3), (1, ts(1, 0), 1, 3),
                                      (1, ts(3, 0), 1, 4)]


def test_group_by_floor_over_all_partitions(cql, events):
    rows = cql.execute(f"SELECT k, floor(ts, 90m) AS bucket, count(*) FROM {events} "
                       "GROUP BY k, floor(ts, 90m)")
    assert sorted(tuple(r) for r in rows) == [(1, ts(0, 0), 3), (1, ts(3, 0), 1),
                                             (2, ts(0, 0), 1)]


def test_group_by_floor_leaving_out_the_partition_key(cql, events):
    # With k restricted by =, GROUP BY may start at the clustering function.
    rs = cql.execute(f"SELECT count(*) FROM {events} WHERE k = 1 GROUP BY floor(ts, 1h)")
    assert [r[0] for r in rs] == [2, 1, 1]


def test_group_by_other_monotonic_functions(cql, events):
    assert [r[0] for r in cql.execute(
        f"SELECT count(*) FROM {events} WHERE k = 1 GROUP BY k, toDate(ts)")] == [4]
    assert [r[0] for r in cql.execute(
        f"SELECT count(*) FROM {events} WHERE k = 1 GROUP BY k, toTimestamp(toDate(ts))")] == [4]
    assert [r[0] for r in cql.execute(
        f"SELECT count(*) FROM {events} WHERE k = 1 GROUP BY k, toUnixTimestamp(ts)")] == [1] * 4


def test_group_by_floor_descending_and_with_a_slice(cql, events):
    rs = cql.execute(f"SELECT count(*) FROM {events} WHERE k = 1 GROUP BY k, floor(ts, 1h) "
                     "ORDER BY ts DESC")
    assert [r[0] for r in rs] == [1, 1, 2]
    rs = cql.execute(f"SELECT floor(ts, 1h), count(*) FROM {events} WHERE k = 1 "
                     "AND ts > '2020-01-01 00:20:00+0000' GROUP BY k, floor(ts, 1h)")
    assert [tuple(r) for r in rs] == [(ts(0, 0), 1), (ts(1, 0), 1), (ts(3, 0), 1)]


def test_group_by_floor_limits(cql, events):
    rs = cql.execute(f"SELECT count(*) FROM {events} WHERE k = 1 GROUP BY k, floor(ts, 1h) LIMIT 2")
    assert [r[0] for r in rs] == [2, 1]
    rs = cql.execute(f"SELECT k, count(*) FROM {events} GROUP BY k, floor(ts, 1h) "
                     "PER PARTITION LIMIT 1")
    assert sorted(tuple(r) for r in rs) == [(1, 2), (2, 1)]


@pytest.mark.parametrize("fetch_size", [1, 2])
def test_group_by_floor_pages_between_groups(cql, events, fetch_size):
    statement = SimpleStatement(f"SELECT k, floor(ts, 1h), count(*) FROM {events} "
                                "GROUP BY k, floor(ts, 1h)", fetch_size=fetch_size)
    rows = [tuple(r) for r in cql.execute(statement)]
    assert sorted(rows) == [(1, ts(0, 0), 2), (1, ts(1, 0), 1), (1, ts(3, 0), 1),
                            (2, ts(0, 0), 1)]


def test_group_by_function_on_a_later_clustering_column(cql, times):
    rs = cql.execute(f"SELECT count(*) FROM {times} WHERE k = 1 GROUP BY k, d, tm, floor(tu, 1h)")
    assert [r[0] for r in rs] == [1]
    rs = cql.execute(f"SELECT count(*) FROM {times} WHERE k = 1 GROUP BY k, d, floor(tm, 1h)")
    assert [r[0] for r in rs] == [1]


@pytest.mark.parametrize("group_by, message", [
    ("k, abs(v)", "Group by functions are only supported on clustering columns, got v"),
    # (Cassandra quotes the operator's function name: system."_add".)
    ("k, toUnixTimestamp(ts) + 1", "Only monotonic functions are supported in the GROUP BY "
     "clause. Got: system.\"?_add"),
    ("k, minTimeuuid(ts)", "Only monotonic functions are supported in the GROUP BY clause. Got: "
     "system.mintimeuuid : \\(timestamp\\) -> timeuuid"),
    ("k, toDate(maxTimeuuid(ts))", "Only monotonic functions are supported in the GROUP BY "
     "clause. Got: system.maxtimeuuid"),
    ("k, floor(ts, 1h, ts)", "Only monotonic functions are supported in the GROUP BY clause. "
     "Got: system.floor"),
    ("k, timestampAsBlob(ts)", "Only monotonic functions are supported in the GROUP BY clause"),
    ("k, now()", "GROUP BY functions must have one clustering column name as parameter"),
    ("token(k)", "Group by functions are only supported on clustering columns, got k"),
    ("k, count(ts)", "Aggregate functions are not supported within the GROUP BY clause, got: "
     "system.count"),
    ("k, floor(ts, 1h), ts", "Functions are only supported on the last element of the GROUP BY "
     "clause"),
    ("k, floor(ts, 1h), floor(ts, 2h)", "Group by currently only support groups of columns "
     "following their declared order in the PRIMARY KEY"),
    ("k, ts, floor(ts, 1h)", "Group by currently only support groups of columns following their "
     "declared order in the PRIMARY KEY"),
])
def test_group_by_function_errors(cql, events, group_by, message):
    with pytest.raises(InvalidRequest, match=message):
        cql.execute(f"SELECT count(*) FROM {events} WHERE k = 1 GROUP BY {group_by}")


def test_group_by_function_must_follow_key_order(cql, test_keyspace):
    schema = "k int, c int, ts timestamp, v int, PRIMARY KEY (k, c, ts)"
    with new_table(cql, test_keyspace, schema) as name:
        with pytest.raises(InvalidRequest, match="Group by currently only support groups of "
                           "columns following their declared order in the PRIMARY KEY"):
            cql.execute(f"SELECT count(*) FROM {name} WHERE k = 1 GROUP BY k, floor(ts, 1h)")
        with pytest.raises(InvalidRequest, match="Grouping on clustering columns is not allowed "
                           "for SELECT DISTINCT queries"):
            cql.execute(f"SELECT DISTINCT k FROM {name} GROUP BY k, c, floor(ts, 1h)")
