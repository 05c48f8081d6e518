"""Cassandra 5.0's vector similarity functions similarity_cosine, similarity_euclidean and
similarity_dot_product: floats in [0, 1] computed over two vector<float, n> of one dimension."""

import pytest
from cassandra import InvalidRequest

from util import new_table


@pytest.fixture(scope="module")
def t(cql, test_keyspace):
    schema = "k int PRIMARY KEY, ve vector<float, 2>, vt vector<text, 2>, li list<int>"
    with new_table(cql, test_keyspace, schema) as name:
        cql.execute(f"INSERT INTO {name} (k, ve, vt, li) VALUES (1, [3.0, 4.0], ['p', 'q'], [1])")
        cql.execute(f"INSERT INTO {name} (k, ve) VALUES (2, [0.0, 0.0])")
        cql.execute(f"INSERT INTO {name} (k) VALUES (3)")
        yield name


def test_similarities(cql, t):
    rs = cql.execute(f"SELECT similarity_cosine(ve, [1, 0]), similarity_euclidean(ve, [3, 5]), "
                     f"similarity_dot_product(ve, [100, 100]) FROM {t} WHERE k = 1")
    assert rs.column_names == ["system.similarity_cosine(ve, [1, 0])",
                               "system.similarity_euclidean(ve, [3, 5])",
                               "system.similarity_dot_product(ve, [100, 100])"]
    assert [ct.typename for ct in rs.column_types] == ["float"] * 3
    # (1 + cos) / 2, 1 / (1 + squared distance), (1 + dot) / 2.
    assert tuple(rs.one()) == (pytest.approx(0.8), 0.5, 350.5)


def test_a_vector_with_itself(cql, t):
    row = cql.execute(f"SELECT similarity_cosine(ve, ve), similarity_euclidean(ve, ve) "
                      f"FROM {t} WHERE k = 1").one()
    assert tuple(row) == (pytest.approx(1.0), 1.0)


def test_null_gives_null(cql, t):
    row = cql.execute(f"SELECT similarity_cosine(ve, [1, 0]), similarity_dot_product(ve, null) "
                      f"FROM {t} WHERE k = 3").one()
    assert tuple(row) == (None, None)


def test_cosine_of_a_zero_vector_fails(cql, t):
    # Zero vectors are fine for the other two, not for the cosine.
    row = cql.execute(f"SELECT similarity_euclidean(ve, [1, 0]) FROM {t} WHERE k = 2").one()
    assert row[0] == 0.5
    with pytest.raises(InvalidRequest, match="Function system.similarity_cosine doesn't support "
                       "all-zero vectors"):
        cql.execute(f"SELECT similarity_cosine(ve, [1, 0]) FROM {t} WHERE k = 2")


def test_argument_errors(cql, t):
    with pytest.raises(InvalidRequest, match="Function system.similarity_cosine requires a float "
                       "vector argument, but found argument vt of type vector<text, 2>"):
        cql.execute(f"SELECT similarity_cosine(vt, vt) FROM {t} WHERE k = 1")
    # A literal of another dimension does not fit.
    with pytest.raises(InvalidRequest):
        cql.execute(f"SELECT similarity_cosine(ve, [1, 0, 0]) FROM {t} WHERE k = 1")


def test_list_literals_are_float_vectors(cql, t):
    # With no vector column to take the type from, each list literal is a vector<float, n>.
    row = cql.execute(f"SELECT similarity_cosine([1, 2], [2, 1]), "
                      f"similarity_euclidean([1.0, 2.0], ve) FROM {t} WHERE k = 1").one()
    assert tuple(row) == (pytest.approx(0.9), pytest.approx(1 / 9))
    with pytest.raises(InvalidRequest, match="All arguments must have the same vector "
                       "dimensions"):
        cql.execute(f"SELECT similarity_dot_product([1.0, 2.0, 3.0], [2.0, 1.0]) FROM {t} "
                    "WHERE k = 1")
