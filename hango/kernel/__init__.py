"""The shared kernel: the data model, settings, errors, the principal, canonical JSON, pagination, input
validation, logging and tracing. It imports nothing else of hango."""
