"""The one row shape every anomaly finder returns, so check.py can union them all."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

ANOMALY_SCHEMA = T.StructType(
    [
        T.StructField("name", T.StringType()),
        T.StructField("key", T.LongType()),
        T.StructField("value", T.LongType()),
        T.StructField("values", T.ArrayType(T.LongType())),
        T.StructField("offset", T.LongType()),
        T.StructField("offsets", T.ArrayType(T.LongType())),
        T.StructField("ops", T.ArrayType(T.LongType())),
        T.StructField("time", T.LongType()),
        T.StructField("cycle", T.StringType()),
    ]
)

ANOMALY_COLUMNS = [field.name for field in ANOMALY_SCHEMA.fields]


def empty_anomalies(spark: SparkSession) -> DataFrame:
    """A typed DataFrame with no anomaly, for finders that found nothing to look at."""
    return spark.createDataFrame([], ANOMALY_SCHEMA)


def conform(df: DataFrame, name: str | Column | None = None, **columns: Column) -> DataFrame:
    """Selects ANOMALY_SCHEMA's columns from ``df`` in order and type.

    ``columns`` maps a schema field to an expression over ``df``; a field
    neither given nor present in ``df`` is null. ``name`` fills ``name``.
    """
    if name is not None:
        columns["name"] = F.lit(name) if isinstance(name, str) else name
    selected = []
    for field in ANOMALY_SCHEMA.fields:
        if field.name in columns:
            expr = columns[field.name]
        elif field.name in df.columns:
            expr = F.col(field.name)
        else:
            expr = F.lit(None)
        selected.append(expr.cast(field.dataType).alias(field.name))
    return df.select(*selected)


def union_all(spark: SparkSession, frames) -> DataFrame:
    """Unions conformed anomaly frames (an empty list gives an empty frame)."""
    result = None
    for frame in frames:
        frame = frame.select(*ANOMALY_COLUMNS)
        result = frame if result is None else result.unionByName(frame)
    return result if result is not None else empty_anomalies(spark)
