"""The domain services the edges call: agents, approvals and their policy, grants, files, audit, tenancy,
the approval preview, the stored-state metrics and webhooks."""
