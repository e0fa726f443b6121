"""Makes the running world match the desired state the control plane records.

The scheduler is platform-level: it reads every tenant's pipelines and jobs
through a :class:`~spate.scheduler.store.ControlStore` (implemented over the
control-plane database by ``spate.api.repositories.control``), decides what each job needs
(:mod:`spate.scheduler.reconcile`, pure), and acts on a cluster backend
(:mod:`spate.scheduler.backends`). Celery carries the work (:mod:`spate.scheduler.app`);
the API pokes it through :mod:`spate.scheduler.client`, and a periodic reconcile
catches up with whatever a poke missed.
"""
