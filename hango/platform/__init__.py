"""The platform services build on: the database pool, the broker's queues, the event publisher, the
composition root (:mod:`hango.platform.runtime`) and the unit of work (:mod:`hango.platform.work`)."""
