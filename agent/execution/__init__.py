"""Where and how safely a candidate runs: the sandbox process with its time and memory limits, whose warm worker holds a shared dataset (`sandbox`), the
executors that spread candidates over workers or Ray (`executors`), and free code (`free_code`) run in its own
namespaces (`isolation`) behind a file-system allow-list and resource limits (`confine`)."""
