"""Cassandra 5.0's masking functions, callable in any selection: mask_null, mask_default (a fixed
value of the argument's type), mask_replace, mask_inner and mask_outer (characters replaced by a
padding character) and mask_hash (a digest of the serialised value)."""

import datetime
import hashlib
import struct
import uuid
from decimal import Decimal

import pytest
from cassandra import InvalidRequest
from cassandra.util import Date, Duration, Time

from util import new_table, new_type


@pytest.fixture(scope="module")
def t(cql, test_keyspace):
    """Row 1 has every column set; row 2 only its key."""
    with new_type(cql, test_keyspace, "a int, b text") as udt:
        schema = (
            "k int PRIMARY KEY, a ascii, bi bigint, bl blob, bo boolean, da date, de decimal, "
            "do double, du duration, fl float, ine inet, i int, si smallint, te text, ti time, "
            "ts timestamp, tin tinyint, u uuid, vi varint, li list<int>, se set<text>, "
            f"ma map<int, text>, tu tuple<int, text>, ud frozen<{udt.split('.')[1]}>, "
            "ve vector<float, 2>"
        )
        with new_table(cql, test_keyspace, schema) as name:
            cql.execute(
                f"INSERT INTO {name} (k, a, bi, bl, bo, da, de, do, du, fl, ine, i, si, te, ti, "
                "ts, tin, u, vi, li, se, ma, tu, ud, ve) VALUES (1, 'abcdef', 5, 0x0102, true, "
                "'2020-01-02', 1.5, 2.5, 1d, 3.5, '1.2.3.4', 7, 8, 'héllo wörld', '01:02:03', "
                "'2020-01-02 03:04:05', 9, 7f803993-b81f-4bff-8462-20c322173650, 10, [1, 2], "
                "{'x'}, {1: 'y'}, (1, 'z'), {a: 1, b: 'w'}, [3.0, 4.0])"
            )
            cql.execute(f"INSERT INTO {name} (k) VALUES (2)")
            yield name


def one(cql, t, selection, k=1):
    return cql.execute(f"SELECT {selection} FROM {t} WHERE k = {k}").one()


def test_mask_null(cql, t):
    rs = cql.execute(f"SELECT mask_null(i), mask_null(te), mask_null(li) FROM {t} WHERE k = 1")
    assert [ct.typename for ct in rs.column_types] == ["int", "varchar", "list"]
    assert tuple(rs.one()) == (None, None, None)


def test_mask_default_of_native_types(cql, t):
    columns = ["a", "bi", "bl", "bo", "da", "de", "do", "du", "fl", "ine", "i", "si", "te", "ti",
               "ts", "tin", "u", "vi"]
    row = one(cql, t, ", ".join(f"mask_default({c})" for c in columns))
    assert tuple(row) == (
        "****", 0, b"", False, Date(datetime.date(1970, 1, 1)), Decimal("0"), 0.0,
        Duration(0, 0, 0), 0.0, "0.0.0.0", 0, 0, "****", Time(0), datetime.datetime(1970, 1, 1),
        0, uuid.UUID(int=0), 0)


def test_mask_default_of_collections_tuples_udts_vectors(cql, t):
    row = one(cql, t, "mask_default(li), mask_default(se), mask_default(ma), mask_default(tu), "
              "mask_default(ud), mask_default(ve)")
    assert (list(row[0]), list(row[1]), dict(row[2]), row[3]) == ([], [], {}, (0, "****"))
    assert (row[4].a, row[4].b, row[5]) == (0, "****", [0.0, 0.0])


def test_mask_default_masks_null_too(cql, t):
    assert tuple(one(cql, t, "mask_default(i), mask_default(te)", k=2)) == (0, "****")


def test_mask_replace(cql, t):
    rs = cql.execute(f"SELECT mask_replace(i, 3), mask_replace(te, 'x'), mask_replace(li, [5]), "
                     f"mask_replace(te, null) FROM {t} WHERE k = 1")
    assert rs.column_names[:2] == ["system.mask_replace(i, 3)", "system.mask_replace(te, 'x')"]
    assert tuple(rs.one()) == (3, "x", [5], None)
    # The replacement is the argument's type.
    with pytest.raises(InvalidRequest, match="Type error: 1 cannot be passed as argument 1 of "
                       "function system.mask_replace of type text"):
        cql.execute(f"SELECT mask_replace(te, 1) FROM {t} WHERE k = 1")


def test_mask_inner_and_outer(cql, t):
    # Characters, not bytes: 'héllo wörld' has 11.
    row = one(cql, t, "mask_inner(te, 1, 2), mask_outer(te, 1, 2), mask_inner(te, 0, 0), "
              "mask_outer(te, 0, 0), mask_inner(te, 100, 1), mask_outer(te, 3, 100)")
    assert tuple(row) == ("h********ld", "*éllo wör**", "*" * 11, "héllo wörld", "héllo wörld",
                          "*" * 11)


def test_mask_inner_and_outer_null_and_negative_lengths_are_zero(cql, t):
    row = one(cql, t, "mask_inner(te, null, 2), mask_outer(te, 2, null), mask_inner(te, -1, 2)")
    assert tuple(row) == ("*********ld", "**llo wörld", "*********ld")


def test_mask_padding_and_ascii(cql, t):
    rs = cql.execute(f"SELECT mask_inner(te, 1, 1, '#'), mask_outer(a, 1, 1, '#'), "
                     f"mask_inner(te, 1, 2, null) FROM {t} WHERE k = 1")
    assert [ct.typename for ct in rs.column_types] == ["varchar", "ascii", "varchar"]
    assert tuple(rs.one()) == ("h#########d", "#bcde#", "h********ld")
    with pytest.raises(InvalidRequest, match="The padding argument for function "
                       "system.mask_inner should be single-character, but 'ab' has 2 characters"):
        cql.execute(f"SELECT mask_inner(te, 1, 2, 'ab') FROM {t} WHERE k = 1")


def test_mask_inner_needs_text(cql, t):
    with pytest.raises(InvalidRequest, match="Function system.mask_inner requires an argument of "
                       "type \\[text\\|varchar\\|ascii\\], but found argument i of type int"):
        cql.execute(f"SELECT mask_inner(i, 1, 2) FROM {t} WHERE k = 1")


def test_mask_of_null_is_null(cql, t):
    assert tuple(one(cql, t, "mask_inner(te, 1, 1), mask_hash(te)", k=2)) == (None, None)


def test_mask_hash(cql, t):
    # A digest of the serialised value: SHA-256 unless named.
    rs = cql.execute(f"SELECT mask_hash(te), mask_hash(i), mask_hash(bl, 'SHA-1'), "
                     f"mask_hash(te, 'MD5') FROM {t} WHERE k = 1")
    assert [ct.typename for ct in rs.column_types] == ["blob"] * 4
    text = "héllo wörld".encode()
    assert tuple(rs.one()) == (
        hashlib.sha256(text).digest(), hashlib.sha256(struct.pack(">i", 7)).digest(),
        hashlib.sha1(b"\x01\x02").digest(), hashlib.md5(text).digest())
    with pytest.raises(InvalidRequest, match="Hash algorithm not found: NOPE"):
        cql.execute(f"SELECT mask_hash(te, 'NOPE') FROM {t} WHERE k = 1")


def test_type_must_be_known(cql, t):
    with pytest.raises(InvalidRequest, match="Cannot infer type of argument NULL in call to "
                       "function system.mask_null"):
        cql.execute(f"SELECT mask_null(null) FROM {t} WHERE k = 1")
