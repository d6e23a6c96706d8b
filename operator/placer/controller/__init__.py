"""`placer run`: the engine driven by a Kopf operator against a real API server.

Modules, each with one job (docs/binding-cycle.md: which one runs which extension point):

- `options`: every tunable in one dataclass (the CLI uses the defaults; tests shorten them);
- `kube`: the only code that talks to the API server besides Kopf's own watches (`kubeconfig`:
  credentials, TLS, the session);
- `state`: the one object that holds the parts together (kept in Kopf's memo), events in, terms;
- `informers`: Placer's own pod and node watches; `handlers`: Kopf handlers for the other kinds;
- `cache`: what the watches feed (pods, nodes, profiles) turned into engine calls; `nominations`:
  nominatedNodeName as kube's nominator follows it; `catalog_feed`: every other kind;
- `resync`: fresh LISTs, pruning, where the watches resume (`listing`: paging, and the LISTs a
  cold start asks for before the engine is imported; `startup_timing`: the start-up in steps, logged);
- `loop`: the scheduling loop, as kube's scheduleOne (pop, schedule, post-filter, reserve, permit);
- `binding`: the binding cycle (WaitOnPermit, PreBind, Bind, PostBind, Unreserve);
- `effects`: the writes plugins and preemption ask for, with their preconditions and undo;
- `preemption`: a PostFilter result carried out (nominatedNodeName, victims' condition, delete, event);
- `reporting`: Scheduled/FailedScheduling/Preempted events and the PodScheduled condition, off the hot path;
- `profiles`: the SchedulerProfile registry; `statuses`: their status written;
- `shadow`, `shadow_recorder`: Shadow profiles' decisions and score;
- `leader`: leader election on a coordination.k8s.io Lease; `api_health`: scheduling paused while
  the API server is silent;
- `node_metrics`: NodeMetrics for NodeUtilization; `metrics` and `health`: `/metrics` and `/healthz`;
- `settings`: Kopf's settings, each with the reason it was chosen;
- `main`: wiring, logging, `run()` for the CLI and `operate()` for tests.
"""
