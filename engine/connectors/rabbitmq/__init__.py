"""``rabbitmq``: RabbitMQ queues and streams as sources and sinks."""
