"""The operator's life: Kopf's hooks, leadership, health.

- `kopf_handlers`, `kopf_settings`: Kopf runs the operator (start-up, clean-up, credentials);
- `leader`: leader election on a Lease, as client-go's;
- `api_health`: scheduling paused while the API server does not answer;
- `health`: `/healthz` and `/metrics`.
"""
