"""One broker process: its config (defaults, file, flags), its log lines, and the wiring of
store, engine and front ends (app.py)."""
