"""SchedulerProfiles, the operator's own resource.

- `feed`: profiles as their informer brings them; `registry`: compiled profiles, who owns which
  schedulerName, the Ready condition each should show; `statuses`: the status written (by the
  leader);
- `shadow`, `shadow_recorder`: Shadow profiles, deciding for another scheduler's pods and keeping
  score.
"""
