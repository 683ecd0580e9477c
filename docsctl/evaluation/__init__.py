"""Search-quality evaluation: judged queries -> rankings -> metrics. Only the CLI imports it."""
