"""Per-batch processing: processors, event codecs, orchestration, dead letters."""
