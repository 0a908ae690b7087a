"""Process entry points and what starts them: the CLI, the reviewers' CLI, the standalone server, the
gunicorn and gevent servers, rootless start-up, gevent patching, migrations and shared worker metrics."""
