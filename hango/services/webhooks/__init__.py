"""Webhooks: notifications to reviewers, signed per Standard Webhooks and delivered at least once by Celery tasks.

``outbox`` writes a delivery row in the transaction that made the event; ``delivery`` sends it from a task after
commit (and from beat's sweep, which also retries and reminds); ``service`` is what the API calls.
"""
