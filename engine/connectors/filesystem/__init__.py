"""Files: the ``filesystem`` connector (a local folder or an S3 prefix) and the ``delta``
and ``iceberg`` sinks."""
