"""Spark's stock Kafka connector (spark-sql-kafka-0-10) for a local pyspark session.

The jars come from Maven Central through ``spark-pom.xml`` beside this file and are cached
like the reference Kafka's (see ``maven.py``):

    .cache/m2/                          Maven's local repository (shared)
    .cache/spark-kafka-<version>/libs/  the connector, its token provider, kafka-clients
                                        and commons-pool2 (the rest ships with pyspark)
    .cache/spark-kafka-<version>/classpath.txt
                                        marker written last; when it and its jars exist,
                                        no Maven run and no network call happen

A session gets them through ``spark.jars`` (a list of local files), never through
``spark.jars.packages``, so nothing is resolved while tests run. The connector's version is
pyspark's own (``MARTLET_SPARK_VERSION`` overrides it).
"""

from __future__ import annotations

import os
from pathlib import Path

from .maven import cache_dir, cached_classpath, copy_dependencies

POM_PATH = Path(__file__).resolve().with_name("spark-pom.xml")
CONNECTOR_ARTIFACT = "spark-sql-kafka-0-10_2.13"


class SparkConnectorError(RuntimeError):
    """The Kafka connector jars could not be fetched."""


def spark_version() -> str:
    env = os.environ.get("MARTLET_SPARK_VERSION")
    if env:
        return env
    import pyspark

    return pyspark.__version__


def spark_kafka_home(version: str | None = None) -> Path:
    return cache_dir() / f"spark-kafka-{version or spark_version()}"


def spark_kafka_jars(version: str | None = None) -> list[str]:
    """The connector's jars for ``version`` (fetched once, then from the cache), as paths."""
    version = version or spark_version()
    fill = copy_dependencies(POM_PATH, {"spark.version": version}, [f"{CONNECTOR_ARTIFACT}-{version}.jar"],
                             f"fetching Spark's Kafka connector {version}", SparkConnectorError)
    return cached_classpath(spark_kafka_home(version), fill).split(os.pathsep)
