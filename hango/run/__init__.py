"""The run lifecycle: creating, claiming, executing, suspending, finishing and reconciling runs."""
