"""Running one pipeline as a job: what to run (:mod:`.spec`), how the job talks
to the scheduler (:mod:`.channel`), and the process entry point a cluster
backend launches (:mod:`.main`).

The scheduler never shares memory with a job. It hands the job a
:class:`~spate.engine.job.spec.JobSpec` and reads the job's events from its
:class:`~spate.engine.job.channel.JobChannel`; it asks the job to stop through the
same channel. That keeps a job movable: a local process, a ``spark-submit``
driver on a standalone cluster or a Kubernetes driver pod all speak the same
protocol.
"""
