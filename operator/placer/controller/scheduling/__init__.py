"""The scheduling cycle (kube-scheduler's `schedule_one.go` and its preemption executor).

- `terms`: when the loop runs (leading, every informer synced; a new term starts from fresh LISTs);
- `loop`: `scheduleOne`: pop, schedule, post-filter, reserve, permit, then hand the pod to its
  binding cycle; `group_cycle`: the whole group of a pod decided together (`podGroupCycle`);
- `preemption`: a PostFilter result carried out (nomination, victims evicted).

The queue itself is the engine's (`placer.engine.queue`): pure, no I/O.
"""
