"""``kinesis``: an Amazon Kinesis Data Streams source and sink."""
