"""Operations: Prometheus metrics (records and learning), the health endpoint, the dashboard generator."""
