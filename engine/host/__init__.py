"""A tenant's warm Spark application, hosting that tenant's jobs as streaming queries
(:mod:`.main`), and the folder the scheduler and the application share (:mod:`.folder`)."""
