"""The Celery edge: task entry points and the beat schedule (the run lifecycle arrives with the runtime)."""
