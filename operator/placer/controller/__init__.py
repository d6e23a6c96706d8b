"""`placer run`: the engine driven by a Kopf operator against a real API server.

Modules, each with one job:

- `options`: every tunable in one dataclass (the CLI uses the defaults; tests shorten them);
- `kube`: the only code that talks to the API server besides Kopf's own watches;
- `state`: the one object that holds the engine's cluster, queue and profiles (kept in Kopf's memo);
- `handlers`: Kopf handlers, a few lines each, that feed `state`;
- `settings`: Kopf's settings, each with the reason it was chosen;
- `loop`: the scheduling loop (decide, assume, bind in parallel);
- `prebind`: a pod's volume bindings written (and waited for) before it is bound;
- `preemption`: a preemption carried out (nominatedNodeName, victims' condition, delete, event);
- `reporting`: Scheduled/FailedScheduling/Preempted events and the PodScheduled condition, off the hot path;
- `profiles`: the SchedulerProfile registry and its status;
- `leader`: leader election on a coordination.k8s.io Lease;
- `metrics` and `health`: `/metrics` and `/healthz`;
- `main`: wiring, logging, `run()` for the CLI and `operate()` for tests.
"""
