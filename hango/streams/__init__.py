"""Live event streams, apart from the run lifecycle: what an API process needs to serve thousands of open streams
(one Redis subscription fanned out to every stream, per-user and per-process slots, shared checks). Only the API
uses them; the run lifecycle publishes events (:mod:`hango.platform.events`) and knows nothing of who listens."""
