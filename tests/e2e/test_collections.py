"""Element-level operations on non-frozen collections and UDTs: adding and removing set
elements and map entries, setting map entries and UDT fields, deleting elements and fields,
prepending and appending to lists, and the errors Cassandra gives for operations a column's
type does not allow."""

import pytest
from cassandra import InvalidRequest

from util import new_table, new_type


@pytest.fixture(scope="module")
def udt(cql, test_keyspace):
    with new_type(cql, test_keyspace, "a int, b text") as name:
        yield name.split(".")[1]


@pytest.fixture(scope="module")
def table(cql, test_keyspace, udt):
    schema = (f"k int PRIMARY KEY, s set<text>, m map<text, int>, l list<int>, "
              f"fm frozen<map<text, int>>, uu {udt}, fu frozen<{udt}>")
    with new_table(cql, test_keyspace, schema) as name:
        yield name


_next_key = iter(range(1, 1_000_000))


@pytest.fixture
def row(cql, table):
    """A fresh key with every collection populated."""
    k = next(_next_key)
    cql.execute(
        f"INSERT INTO {table} (k, s, m, l, fm, uu, fu) VALUES ({k}, {{'a', 'b', 'c'}}, "
        f"{{'x': 1, 'y': 2, 'z': 3}}, [1, 2, 3], {{'q': 1}}, {{a: 1, b: 'one'}}, {{a: 2, b: 'two'}})"
    )
    return k


def get(cql, table, k, column):
    return getattr(cql.execute(f"SELECT {column} FROM {table} WHERE k = %s", [k]).one(), column)


def test_set_remove_elements(cql, table, row):
    cql.execute(f"UPDATE {table} SET s = s - {{'a', 'nope'}} WHERE k = {row}")
    assert get(cql, table, row, "s") == {"b", "c"}
    cql.execute(f"UPDATE {table} SET s = s - {{'b', 'c'}} WHERE k = {row}")
    assert get(cql, table, row, "s") is None  # an empty set reads as null


def test_set_add_then_remove_with_bind_markers(cql, table, row):
    add = cql.prepare(f"UPDATE {table} SET s = s + ? WHERE k = ?")
    remove = cql.prepare(f"UPDATE {table} SET s = s - ? WHERE k = ?")
    cql.execute(add, [{"d", "e"}, row])
    cql.execute(remove, [{"a", "d"}, row])
    assert get(cql, table, row, "s") == {"b", "c", "e"}


def test_delete_set_element(cql, table, row):
    cql.execute(f"DELETE s['b'] FROM {table} WHERE k = {row}")
    assert get(cql, table, row, "s") == {"a", "c"}


def test_map_put_remove_and_null_entry(cql, table, row):
    cql.execute(f"UPDATE {table} SET m['w'] = 9, m['x'] = 10 WHERE k = {row}")
    cql.execute(f"UPDATE {table} SET m = m - {{'y'}} WHERE k = {row}")
    cql.execute(f"UPDATE {table} SET m['z'] = null WHERE k = {row}")  # null deletes the entry
    assert dict(get(cql, table, row, "m")) == {"w": 9, "x": 10}
    cql.execute(f"DELETE m['w'] FROM {table} WHERE k = {row}")
    assert dict(get(cql, table, row, "m")) == {"x": 10}


def test_map_entry_with_bind_markers_and_using_ttl(cql, table, row):
    put = cql.prepare(f"UPDATE {table} USING TTL 1000 SET m[?] = ? WHERE k = ?")
    cql.execute(put, ["t", 7, row])
    assert dict(get(cql, table, row, "m"))["t"] == 7
    remove = cql.prepare(f"UPDATE {table} SET m = m - ? WHERE k = ?")
    cql.execute(remove, [{"t", "x"}, row])
    assert dict(get(cql, table, row, "m")) == {"y": 2, "z": 3}


def test_map_remove_null_is_a_no_op(cql, table, row):
    cql.execute(f"UPDATE {table} SET m = m - null WHERE k = {row}")
    assert dict(get(cql, table, row, "m")) == {"x": 1, "y": 2, "z": 3}


def test_udt_field_set_and_delete(cql, table, row):
    cql.execute(f"UPDATE {table} SET uu.b = 'uno' WHERE k = {row}")
    value = get(cql, table, row, "uu")
    assert (value.a, value.b) == (1, "uno")
    cql.execute(f"DELETE uu.a FROM {table} WHERE k = {row}")
    value = get(cql, table, row, "uu")
    assert (value.a, value.b) == (None, "uno")
    cql.execute(f"UPDATE {table} SET uu.b = null WHERE k = {row}")
    assert get(cql, table, row, "uu") is None  # no field left


def test_udt_field_with_bind_marker(cql, table, row):
    cql.execute(cql.prepare(f"UPDATE {table} SET uu.a = ? WHERE k = ?"), [42, row])
    assert get(cql, table, row, "uu").a == 42


def test_list_prepend_and_append_keep_order(cql, table, row):
    cql.execute(f"UPDATE {table} SET l = [0] + l WHERE k = {row}")
    cql.execute(f"UPDATE {table} SET l = [-2, -1] + l WHERE k = {row}")
    cql.execute(f"UPDATE {table} SET l = l + [4, 5] WHERE k = {row}")
    cql.execute(f"UPDATE {table} SET l = [-3] + l, l = l + [6] WHERE k = {row}")
    assert get(cql, table, row, "l") == [-3, -2, -1, 0, 1, 2, 3, 4, 5, 6]


def test_list_prepend_to_missing_row_creates_it(cql, table):
    k = next(_next_key)
    cql.execute(f"UPDATE {table} SET l = [1, 2] + l WHERE k = {k}")
    cql.execute(f"UPDATE {table} SET l = [0] + l WHERE k = {k}")
    assert get(cql, table, k, "l") == [0, 1, 2]


@pytest.mark.parametrize("statement", [
    "UPDATE {t} SET s['a'] = 'x' WHERE k = {k}",       # sets have no keyed elements
    "UPDATE {t} SET fm['q'] = 2 WHERE k = {k}",        # frozen collection
    "UPDATE {t} SET fu.a = 3 WHERE k = {k}",           # frozen UDT
    "DELETE fu.a FROM {t} WHERE k = {k}",
    "DELETE fm['q'] FROM {t} WHERE k = {k}",
    "UPDATE {t} SET m[null] = 1 WHERE k = {k}",
    "UPDATE {t} SET uu.nope = 1 WHERE k = {k}",
    "UPDATE {t} SET k = k - {{1}} WHERE k = {k}",      # primary key column
    "UPDATE {t} SET s = {{'x'}} + s WHERE k = {k}",    # prepend is for lists only
    "UPDATE {t} SET fm = fm - {{'q'}} WHERE k = {k}",  # frozen collection
])
def test_invalid_element_operations(cql, table, row, statement):
    with pytest.raises(InvalidRequest):
        cql.execute(statement.format(t=table, k=row))
    # The row is untouched.
    assert get(cql, table, row, "s") == {"a", "b", "c"}
    assert dict(get(cql, table, row, "fm")) == {"q": 1}


# --- lists by index and value: a read before the write -------------------------------------


def test_list_set_and_delete_by_index(cql, table, row):
    cql.execute(f"UPDATE {table} SET l[1] = 20 WHERE k = {row}")
    assert get(cql, table, row, "l") == [1, 20, 3]
    cql.execute(f"DELETE l[0] FROM {table} WHERE k = {row}")
    assert get(cql, table, row, "l") == [20, 3]
    cql.execute(f"UPDATE {table} SET l[1] = null WHERE k = {row}")  # null deletes the element
    assert get(cql, table, row, "l") == [20]


def test_list_remove_values_removes_every_occurrence(cql, table, row):
    cql.execute(f"UPDATE {table} SET l = l + [2, 1] WHERE k = {row}")
    cql.execute(f"UPDATE {table} SET l = l - [2, 9] WHERE k = {row}")
    assert get(cql, table, row, "l") == [1, 3, 1]
    cql.execute(f"UPDATE {table} SET l = l - null WHERE k = {row}")
    assert get(cql, table, row, "l") == [1, 3, 1]


def test_list_index_with_bind_markers(cql, table, row):
    stmt = cql.prepare(f"UPDATE {table} SET l[?] = ? WHERE k = ?")
    assert [c.name for c in stmt.column_metadata] == ["idx(l)", "value(l)", "k"]
    cql.execute(stmt, [2, 30, row])
    assert get(cql, table, row, "l") == [1, 2, 30]


def test_list_operations_in_a_batch_see_the_list_before_the_batch(cql, table, row):
    cql.execute(f"BEGIN BATCH UPDATE {table} SET l[0] = 10 WHERE k = {row}; "
                f"UPDATE {table} SET l = l - [3] WHERE k = {row}; APPLY BATCH")
    assert get(cql, table, row, "l") == [10, 2]


@pytest.mark.parametrize("statement", [
    "UPDATE {t} SET l[3] = 1 WHERE k = {k}",
    "UPDATE {t} SET l[-1] = 1 WHERE k = {k}",
    "DELETE l[3] FROM {t} WHERE k = {k}",
    "UPDATE {t} SET l[null] = 1 WHERE k = {k}",
    "UPDATE {t} SET l[0] = 1 WHERE k = 999999999",   # no list there
    "DELETE l[0] FROM {t} WHERE k = 999999999",
])
def test_list_index_errors(cql, table, row, statement):
    with pytest.raises(InvalidRequest):
        cql.execute(statement.format(t=table, k=row))
    assert get(cql, table, row, "l") == [1, 2, 3]


def test_static_list_by_index(cql, test_keyspace):
    schema = "k int, c int, v int, sl list<text> static, PRIMARY KEY (k, c)"
    with new_table(cql, test_keyspace, schema) as t:
        cql.execute(f"INSERT INTO {t} (k, c, v, sl) VALUES (1, 1, 1, ['a', 'b'])")
        cql.execute(f"UPDATE {t} SET sl[0] = 'z' WHERE k = 1")
        cql.execute(f"UPDATE {t} SET sl = sl - ['b'] WHERE k = 1")
        assert cql.execute(f"SELECT sl FROM {t} WHERE k = 1").one().sl == ["z"]
        # SELECT * lists static columns before regular ones.
        assert cql.execute(f"SELECT * FROM {t}").column_names == ["k", "c", "sl", "v"]


@pytest.mark.parametrize("statement, message", [
    ("UPDATE {t} SET fl[0] = 1 WHERE k = 0", "Invalid operation (fl[0] = 1) for frozen collection column fl"),
    ("UPDATE {t} SET fm[1] = 1 WHERE k = 0", "Invalid operation (fm[1] = 1) for frozen collection column fm"),
    ("UPDATE {t} SET fl = fl + [1] WHERE k = 0", "Invalid operation (fl = fl + [1]) for frozen collection column fl"),
    ("UPDATE {t} SET fl = [1] + fl WHERE k = 0", "Invalid operation (fl = [1] - fl) for frozen list column fl"),
    ("UPDATE {t} SET fs = fs - {{1}} WHERE k = 0", "Invalid operation (fs = fs - {{1}}) for frozen collection column fs"),
    ("UPDATE {t} SET fu.a = 1 WHERE k = 0", "Invalid operation (fu.a = 1) for frozen UDT column fu"),
    ("UPDATE {t} SET fu = fu + {{a: 1}} WHERE k = 0", "Invalid operation (fu = fu + {{a: 1}}) for tuple column fu"),
    ("UPDATE {t} SET t = t + (1, 1) WHERE k = 0", "Invalid operation (t = t + (1, 1)) for tuple column t"),
    ("UPDATE {t} SET t = t - (1, 1) WHERE k = 0", "Invalid operation (t = t - (1, 1)) for non counter column t"),
    ("UPDATE {t} SET s[1] = 1 WHERE k = 0", "Invalid operation (s[1] = 1) for set column s"),
    ("UPDATE {t} SET v[1] = 1 WHERE k = 0", "Invalid operation (v[1] = 1) for non collection column v"),
    ("DELETE fl[0] FROM {t} WHERE k = 0", "Invalid deletion operation for frozen collection column fl"),
    ("DELETE fm[1] FROM {t} WHERE k = 0", "Invalid deletion operation for frozen collection column fm"),
    ("DELETE fu.a FROM {t} WHERE k = 0", "Frozen UDT column fu does not support field deletions"),
    ("DELETE v.a FROM {t} WHERE k = 0", "Invalid field deletion operation for non-UDT column v"),
    ("SELECT * FROM {t} WHERE fl[0] = 1 ALLOW FILTERING",
     "Indexes on list entries (fl[index] = value) are not currently supported."),
])
def test_frozen_collection_operations_refused_in_cassandras_words(cql, test_keyspace, statement, message):
    """A frozen collection or UDT is one value: no element or field of it is set, appended,
    removed or deleted alone; Cassandra quotes the operation as written."""
    with new_type(cql, test_keyspace, "a int, b int") as u:
        schema = (f"k int PRIMARY KEY, v int, s set<int>, fl frozen<list<int>>, fs frozen<set<int>>, "
                  f"fm frozen<map<int, int>>, fu frozen<{u}>, t tuple<int, int>")
        with new_table(cql, test_keyspace, schema) as t:
            with pytest.raises(InvalidRequest) as error:
                cql.execute(statement.format(t=t))
            assert message.format() in str(error.value)
