"""The informers and the cache they feed (kube-scheduler's client-go informers, `eventhandlers.go` and
`backend/cache`).

- `informer`: one collection kept in step (list, watch, resume, relist on 410, synced);
- `cache`: pods and nodes turned into engine calls (the cluster's accounting, the queue);
- `catalog`: every other kind filed into the engine's catalog; `group_kinds`: which PodGroup APIs
  are served, each through an informer;
- `groups`: the pending members of each group and who waits for their group; `nominations`: pods'
  `status.nominatedNodeName`, as kube's nominator follows it;
- `node_metrics`: metrics.k8s.io NodeMetrics, polled while a profile uses them.
"""
