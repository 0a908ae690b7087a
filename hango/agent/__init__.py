"""The agent core: messages, models, tools, middleware and the resumable loop."""
