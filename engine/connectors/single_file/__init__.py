"""``single_file``: a bounded line file source and an exactly-once file sink."""
