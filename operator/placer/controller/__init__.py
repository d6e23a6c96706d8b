"""`placer run`: the engine driven against a real API server, in kube-scheduler's shape.

One sub-package per stage (docs/architecture.md follows a pod through them):

- `transport`: the API client (requests, LIST pages, watches; kubeconfig, TLS, proxies, retries);
- `informers`: every collection the scheduler reads, kept in step, feeding the cache;
- `scheduling`: when the loop runs, the scheduling cycle, group cycles, preemption;
- `binding`: the binding cycle and every write (plugins' writes, events, conditions);
- `profiles`: the SchedulerProfile registry, its status, shadow profiles;
- `lifecycle`: Kopf's hooks, leader election, the API server's health, /healthz and /metrics.

And beside them: `options` (every tunable), `metrics` (the Prometheus series), `signals` (wake-ups),
`state` (the composition root: every part built and wired) and `main` (logging, Kopf, `placer run`).
"""
