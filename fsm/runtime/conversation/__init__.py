"""A run's conversation with its customer: the engine's side (:mod:`.engine`: starting
one, taking replies, reading them, expiring a wait nobody answers), what a step writes of
it (:mod:`.writes`) and how a reply or a confirmation is judged (:mod:`.judging`)."""
