"""fetch_rows: the rows collect() would give, as dicts, through Arrow."""

import numpy as np

from checkers.fetch import fetch_rows, table_rows


def test_rows_come_back_as_collect_gives_them(spark):
    frame = spark.createDataFrame(
        [(1, "a", [3, 4], None), (2, None, None, 7), (-(1 << 62), "", [], 0)],
        "key long, name string, values array<long>, offset long",
    )
    assert fetch_rows(frame) == [row.asDict() for row in frame.collect()]
    assert fetch_rows(frame)[1] == {"key": 2, "name": None, "values": None, "offset": 7}


def test_an_empty_result_is_an_empty_list(spark):
    frame = spark.createDataFrame([(1,)], "key long").where("key > 1")
    assert fetch_rows(frame) == []


def test_named_list_columns_come_back_as_numpy_arrays(spark):
    frame = spark.createDataFrame([(1, [3, 4]), (2, None), (3, [])], "key long, values array<long>")
    rows = table_rows(frame.toArrow(), ("values",))
    assert [row["key"] for row in rows] == [1, 2, 3]
    assert rows[0]["values"].tolist() == [3, 4] and rows[0]["values"].dtype == np.int64
    assert rows[1]["values"] is None
    assert rows[2]["values"].tolist() == []
