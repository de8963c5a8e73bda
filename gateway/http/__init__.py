"""The broker's HTTP port: the JSON API the CLI and the web console read, Prometheus metrics and
the console's static files (docs/http-api.md)."""
