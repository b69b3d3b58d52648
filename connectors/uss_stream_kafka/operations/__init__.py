"""Operations: Prometheus metrics and the health endpoint."""
