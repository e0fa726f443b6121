"""Record formats (json, raw, debezium_json, avro, protobuf): decoded into Arrow columns,
encoded for sinks."""
