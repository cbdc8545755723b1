"""What the runs an engine drives show: hooks, OpenTelemetry traces and metrics."""
