# Sourced by Spark's launch scripts: the standalone Master and Workers the tests start get the
# same JIT and collector settings as the drivers and executors (see spark-defaults.conf).
SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
