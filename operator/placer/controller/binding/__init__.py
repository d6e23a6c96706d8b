"""The binding cycle and the writes (kube-scheduler's `bindingCycle`, its event recorder and status
updates).

- `cycle`: WaitOnPermit, PreBind, Bind, PostBind, Unreserve on failure;
- `effects`: the writes plugins and preemption ask for, with their preconditions and undo;
- `reporting`: Scheduled/FailedScheduling/Preempted events and the PodScheduled condition;
- `group_status`: an upstream PodGroup's status condition.
"""
