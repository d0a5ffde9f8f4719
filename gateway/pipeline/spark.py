"""SparkSession set-up for the pipeline: local by default, any master by URL.

What the project takes care of so ``pipeline run`` just works:

* ``local[*]`` unless ``--master`` says otherwise (``spark://…``, ``yarn``, ``k8s://…``);
* for local masters: ``SPARK_LOCAL_IP=127.0.0.1`` and the driver bound to
  loopback, ``PYSPARK_PYTHON`` = this interpreter, few shuffle partitions;
* quiet logs: a log4j2 configuration at WARN (Hadoop's native-library notice
  silenced), no console progress bars, no web UI;
* no runtime downloads: no ``spark.jars.packages``, only the jars PySpark ships;
* UTC session time zone, so buckets and partitions agree with the archive.

Java is needed; a clear error says so when it is missing.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.config import DEFAULTS
from gateway.errors import HeroError

LOG4J2_PROPERTIES = """\
status = error
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
logger.snapshot.name = org.apache.spark.util.Utils
logger.snapshot.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.codegen.name = org.apache.spark.sql.catalyst.expressions.codegen
logger.codegen.level = error
"""


class SparkUnavailable(HeroError):
    """Spark cannot start here (no Java, no pyspark)."""

    default_message = "Spark is not available"


@dataclass(frozen=True)
class SparkOptions:
    master: str = DEFAULTS.pipeline_master
    app_name: str = "hero-gateway-pipeline"
    #: ``spark.sql.shuffle.partitions``; default 8 on local masters, Spark's own elsewhere.
    shuffle_partitions: int | None = None
    #: ``spark.driver.memory`` (only applies when this process starts the JVM).
    driver_memory: str | None = None
    conf: Mapping[str, str] = field(default_factory=dict)

    @property
    def local(self) -> bool:
        return self.master == "local" or self.master.startswith("local[")


def _log4j_file() -> Path:
    path = Path(tempfile.gettempdir()) / f"hero-gateway-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != LOG4J2_PROPERTIES:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(LOG4J2_PROPERTIES)
        tmp.replace(path)
    return path


def java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def prepare_environment(options: SparkOptions) -> None:
    """Environment the JVM and Python workers need; call before the session starts."""
    if java_binary() is None:
        raise SparkUnavailable(
            "Java was not found (set JAVA_HOME or put `java` on PATH; `make setup` installs it)"
        )
    if options.local:
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        os.environ["PYSPARK_PYTHON"] = sys.executable
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def spark_conf(options: SparkOptions) -> dict[str, str]:
    """The configuration the session is built with (separate for tests and docs)."""
    log4j = f"-Dlog4j2.configurationFile=file:{_log4j_file()}"
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.adaptive.enabled": "true",
        "spark.driver.extraJavaOptions": log4j,
        "spark.executor.extraJavaOptions": log4j,
        "spark.sql.parquet.compression.codec": "snappy",
        "spark.sql.debug.maxToStringFields": "1000",
    }
    if options.local:
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.sql.shuffle.partitions"] = str(options.shuffle_partitions or 8)
    elif options.shuffle_partitions:
        conf["spark.sql.shuffle.partitions"] = str(options.shuffle_partitions)
    if options.driver_memory:
        conf["spark.driver.memory"] = options.driver_memory
    conf.update(options.conf)
    return conf


def session(options: SparkOptions | None = None) -> Any:
    """A SparkSession (the active one when this process already has it)."""
    options = options or SparkOptions()
    prepare_environment(options)
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - pyspark is a declared extra
        raise SparkUnavailable(
            "pyspark is not installed (pip install 'hero-gateway[pipeline]')"
        ) from exc
    builder = SparkSession.builder.master(options.master).appName(options.app_name)
    for key, value in spark_conf(options).items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise SparkUnavailable(
            f"Spark did not start on master {options.master!r}: {first_line}"
        ) from exc
    spark.sparkContext.setLogLevel("WARN")
    # py4j logs every gateway round trip at INFO/DEBUG.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return spark


def shutdown(spark: Any) -> None:
    """Stop ``spark`` and the JVM this process started for it.

    ``SparkSession.stop`` leaves the JVM (py4j's gateway) running until the
    Python process exits; a long-lived process that is done with Spark, like a
    test session that checks nothing it started outlives it, ends it here. The
    JVM leaves when its stdin closes, which pyspark opened for exactly that."""
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = SparkContext._jvm = None
    if proc is None:
        return
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
