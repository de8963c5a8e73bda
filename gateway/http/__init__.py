"""The broker's HTTP port: the JSON API the CLI and the web console read, Prometheus metrics and
the console's static files (ARCHITECTURE.md, "HTTP API and metrics")."""
