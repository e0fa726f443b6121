#!/bin/sh
# Entry point of Spate's image. Spark on Kubernetes starts its driver and
# executor pods with the first argument `driver` or `executor`; anything else
# (spate serve, spate worker, uvicorn, spate db upgrade) runs as given.
set -eu

case "${1:-}" in
driver)
    shift
    # The driver pod's own address, which Spark passes in the environment.
    exec "$SPARK_HOME/bin/spark-submit" \
        --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS}" \
        --deploy-mode client "$@"
    ;;
executor)
    shift
    # The JVM options Spark hands the executor: SPARK_JAVA_OPT_0, _1, … in order.
    set --
    index=0
    while eval "[ -n \"\${SPARK_JAVA_OPT_${index}+set}\" ]"; do
        eval "set -- \"\$@\" \"\$SPARK_JAVA_OPT_${index}\""
        index=$((index + 1))
    done
    exec java \
        -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" "$@" \
        -cp "$SPARK_HOME/conf:$SPARK_HOME/jars/*" \
        org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
        --driver-url "$SPARK_DRIVER_URL" \
        --executor-id "$SPARK_EXECUTOR_ID" \
        --cores "$SPARK_EXECUTOR_CORES" \
        --app-id "$SPARK_APPLICATION_ID" \
        --hostname "$SPARK_EXECUTOR_POD_IP" \
        --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
        --podName "$SPARK_EXECUTOR_POD_NAME"
    ;;
*)
    exec "$@"
    ;;
esac
