"""The plugin interfaces, in one place, after kube-scheduler's `framework/interface.go`.

A plugin is a class with a `name`, an `Args` model (pydantic, validated when a profile is
loaded) and one or more of the extension points below. Plugins work on whole columns: a filter
returns a boolean mask over every node slot, a score returns one value per candidate slot. They
never see the queue or the API server; the runtime (`placer.engine.runtime`) calls them.

The two cycles, as kube-scheduler's (docs/binding-cycle.md has the picture):

- the scheduling cycle: PreFilter, Filter, PostFilter (`PostFilterPlugin`, e.g. preemption), Score,
  Reserve (`ReservePlugin`), Permit (`PermitPlugin`: allow, reject, or wait, held in `WaitingPods`);
- the binding cycle: WaitOnPermit, PreBind (`PreBindPlugin`), Bind, PostBind (`PostBindPlugin`), and
  Unreserve on any failure.

The binding points run for every plugin of a profile that implements them, whichever list names it
(filters, scores, postFilters). Plugins stay pure there too: a PreBind says *what* must be written
(`Write`: a patch or delete of any object, with a resourceVersion or UID precondition, and how to
undo it) and what to wait for (`WaitFor`: a predicate over the watch-fed cluster), and the operator
(`placer.controller.binding.effects`, `placer.controller.binding.cycle`) carries it out.

Adding a plugin: write `placer/plugins/<name>.py` with the class and its docstring (what it
does, its args, an example profile), a `<name>_test.py` beside it, and its entry point in the
group `placer.plugins` of pyproject.toml (`Name = module:Class`), as any plugin package does;
`placer/plugins/__init__.py` loads and checks them.
"""

from __future__ import annotations

import enum
import weakref
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Generic, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from placer.engine.cluster import ClusterState, PodRecord
from placer.engine.objects import PodInfo
from placer.engine.writes import JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, ObjectRef, Write

__all__ = [
    "ALLOW",
    "BATCH_NODE",
    "BATCH_NONE",
    "JSON_PATCH",
    "MAX_NODE_SCORE",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "UNSIGNABLE",
    "BindingPoints",
    "ClusterEvent",
    "CycleMemo",
    "EvictionCheck",
    "EvictionTerms",
    "FilterPlugin",
    "NoArgs",
    "Notice",
    "ObjectRef",
    "Permit",
    "PermitCode",
    "PermitPlugin",
    "Placement",
    "PlacementAssignment",
    "PlacementError",
    "PlacementGeneratePlugin",
    "PlacementScorePlugin",
    "Plugin",
    "PluginArgs",
    "PostBindPlugin",
    "PostFilterContext",
    "PostFilterPlugin",
    "PostFilterWrites",
    "PreBind",
    "PreBindError",
    "PreBindPlugin",
    "PreFilterResult",
    "Preemption",
    "ReservePlugin",
    "ScorePlugin",
    "StaticCache",
    "WaitFor",
    "WaitingPod",
    "WaitingPods",
    "Write",
    "default_normalize",
    "fit_error_message",
    "go_duration",
    "minmax_normalize",
]

MAX_NODE_SCORE = 100

ArgsT = TypeVar("ArgsT", bound="PluginArgs")


class ClusterEvent:
    """Changes that may make a pod schedulable again (kube's `ClusterEvent`s).

    A filter lists in `events` those that may undo its rejections; a pod it rejected waits for
    one of them (or its backoff), so a busy cluster does not retry every pending pod on every
    change. `"Node"` stands for every node event, and a catalog kind's name (`"Namespace"`,
    `"PersistentVolumeClaim"`, ...) for every change of that kind.
    """

    NODE = "Node"
    NODE_ADD = "Node/Add"
    NODE_UPDATE = "Node/Update"  # labels, taints, allocatable, conditions, images
    NODE_DELETE = "Node/Delete"
    POD = "Pod"
    POD_ADD = "Pod/Add"  # a pod counted on a node (bound, or assumed by this scheduler)
    POD_UPDATE = "Pod/Update"  # a counted pod's labels or requests changed
    POD_DELETE = "Pod/Delete"  # a counted pod is gone: what it held is free
    NODE_METRICS = "NodeMetrics"
    # a pending pod's own update (kube's PodSchedulingPropertiesChange): asked only of the plugins
    # that rejected that pod, never broadcast to the others
    POD_LABEL = "Pod/UpdatePodLabel"
    POD_SCALE_DOWN = "Pod/UpdatePodScaleDown"
    POD_TOLERATION = "Pod/UpdatePodToleration"
    POD_GENERATED_CLAIM = "Pod/UpdatePodGeneratedResourceClaim"

    @staticmethod
    def matches(event: str, wanted: frozenset[str]) -> bool:
        """Whether `event` is one of `wanted` (a kind stands for all its actions)."""
        return event in wanted or event.partition("/")[0] in wanted


class PluginArgs(BaseModel):
    """Base of every plugin's args: unknown fields are errors, values are immutable. Each subclass's
    validator is built when first used (`defer_build`), not when its module is imported: a cold
    start imports every plugin's args and its profiles use a few (~15 ms of CPU saved)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class NoArgs(PluginArgs):
    """For plugins that take no arguments."""


class _Unsignable:
    """`Plugin.sign`'s answer for a pod the plugin cannot sign."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSIGNABLE"


UNSIGNABLE: Final = _Unsignable()
#: `Plugin.batch_reach`: a pod counted or uncounted on a node changes the plugin's answers for a
#: signed pod on that node only (its own pods: requests, ports)
BATCH_NODE: Final = "node"
#: ... on no node (the answers read node facts and the catalog only)
BATCH_NONE: Final = "none"


class Plugin(ABC, Generic[ArgsT]):
    """What every plugin has: a name and validated args.

    Opportunistic batching (kube's SignPlugin, KEP-5598): a plugin that can tell what of a pod its
    answers depend on signs pods (`sign`); a pod whose every plugin signs it as the pod decided
    before reuses that pod's work (`placer.engine.runtime`), updated where pods were counted or
    uncounted since, as `batch_reach` and `batch_breaks` say. A plugin that does not sign (the
    default) keeps its profile's pods out of batching."""

    name: ClassVar[str]
    Args: ClassVar[type[PluginArgs]] = NoArgs
    #: where counting or uncounting a pod changes this plugin's answers for a pod it signs:
    #: BATCH_NODE (on that pod's node only) or BATCH_NONE (nowhere, but see `batch_breaks`)
    batch_reach: ClassVar[str] = BATCH_NODE

    def __init__(self, args: ArgsT) -> None:
        self.args = args

    def warnings(self, cluster: ClusterState) -> list[str]:
        """Conditions worth reporting in the profile status (e.g. missing metrics)."""
        return []

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        """What of `pod` this plugin's answers depend on (its PreFilter, Filter with its reasons,
        PreScore and raw Score on each node, for the same cluster), as a value compared with `==`
        (kube's SignFragment): two pods with equal values get equal answers. UNSIGNABLE (the
        default): the plugin cannot tell, and the pod is decided afresh (kube's Unschedulable
        status from SignPod)."""
        return UNSIGNABLE

    def batch_breaks(self, pod: PodInfo, changed: PodInfo) -> bool:
        """Whether `changed`, counted or uncounted on some node, may change this plugin's answers
        for `pod` (a pod it signed) beyond `batch_reach`: on any node."""
        return False


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """kube's PreFilterResult: a PreFilter that knows the only nodes the pod may go to (NodeAffinity's
    `matchFields` `metadata.name In [...]`) names them, and the cycle evaluates only those. The sets
    of several plugins are intersected; every other node is reported as `node(s) didn't satisfy
    plugin(s) [<plugins>]` (unresolvable: preemption does not try it), and an empty intersection
    rejects the pod itself."""

    node_names: frozenset[str]


@dataclass(frozen=True, slots=True)
class EvictionTerms:
    """A resolvable filter's answer on some nodes as pods are evicted, as arithmetic: per node a
    shortfall in each of a few quantities (a pod slot, millicores, conflicting host ports...), and
    what evicting one pod frees of each; the pod passes there once the pods evicted free at least
    the shortfall in every quantity. Preemption's dry run (kube's SelectVictimsOnNode) then weighs
    thousands of nodes and their victims in a few array operations rather than running the filter
    per node per victim (`FilterPlugin.eviction_terms`)."""

    #: (nodes, quantities): how much evictions must free on each node; <= 0: nothing
    shortfall: np.ndarray
    #: what evicting one pod (a pod counted on the node) frees of each quantity, all >= 0
    frees: Callable[[PodInfo], Sequence[int]]
    #: (priority) -> (nodes, quantities): what evicting every pod of a lower priority frees on each
    #: node, when the plugin can tell without visiting the pods; None: the dry run sums `frees`
    frees_below: Callable[[int], np.ndarray] | None = None
    #: what `frees` depends on besides the victim (the same key: the same answers, so the dry run
    #: may keep a node's rows from one preemptor to the next); None: not to be kept
    frees_key: Hashable | None = None


class FilterPlugin(Plugin[ArgsT]):
    """Decides which nodes can run the pod at all."""

    #: the reason given for every rejected node, for plugins that have only one
    reason: ClassVar[str] = ""
    #: cluster events that may make a pod this plugin rejected schedulable (see ClusterEvent)
    events: ClassVar[frozenset[str]] = frozenset({ClusterEvent.NODE})
    #: whether evicting pods may undo this plugin's rejections (kube's Unschedulable, as against
    #: UnschedulableAndUnresolvable): preemption looks only at nodes such filters rejected
    resolvable: ClassVar[bool] = False

    def pre_filter(self, pod: PodInfo, cluster: ClusterState) -> str | PreFilterResult | None:
        """A reason that concerns the pod rather than any node (kube's PreFilter rejection, e.g. a
        missing claim): the pod fits nowhere, and the message reads `0/N nodes are available: <it>.`
        Or a `PreFilterResult`: only the nodes it names are worth evaluating. None: no opinion."""
        return None

    @abstractmethod
    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        """A bool mask over slots `[0, cluster.size)`: True where the pod fits. None: all fit."""

    def filter_at(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray | None:
        """`filter` on `slots` only (a batched pod's nodes whose pods changed since the pod it
        reuses the work of); None: all fit. Plugins whose `filter` is not cached do it cheaper."""
        mask = self.filter(pod, cluster)
        return None if mask is None else mask[slots]

    def reason_counts(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> Counter[str]:
        """For the slots this filter rejected, how many nodes gave each reason.

        Asked only when a pod is unschedulable, to build kube-scheduler's message.
        """
        return Counter({self.reason: len(rejected)})

    def resolvable_nodes(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> np.ndarray:
        """For the slots this filter rejected, whether evicting pods may undo it (a plugin with both
        kinds of reasons, such as InterPodAffinity, tells them apart per node)."""
        return np.full(len(rejected), self.resolvable, dtype=bool)

    def queueing_hint(self, pod: PodInfo, event: str, old: Any, new: Any) -> bool:
        """kube's QueueingHintFn, asked for each of `events` that comes while `pod` waits after this
        plugin rejected it: whether the change (`old` -> `new`: PodInfo or NodeInfo, None when added
        or deleted or not known) may make it schedulable (kube's Queue; False: QueueSkip). The
        default queues: a plugin says Skip only for changes it knows cannot help."""
        return True

    def fits_without(self, pod: PodInfo, cluster: ClusterState, slot: int, removed: Sequence[PodRecord]) -> bool:
        """Whether the pod would pass this filter on `slot` if the `removed` pods were gone — what
        preemption asks, victim by victim. This default takes them out of the cluster, asks
        `filter`, and puts them back; plugins whose answer is local to a node do it cheaper.
        (`filter` returning None must mean the plugin does not constrain this pod at all, whatever
        runs where: then no pod needs to move.)"""
        if self.filter(pod, cluster) is None:
            return True
        with cluster.without(removed):
            mask = self.filter(pod, cluster)
            return mask is None or bool(mask[slot])

    def eviction_terms(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> EvictionTerms | None:
        """`fits_without` on the nodes `slots` at once, as arithmetic (`EvictionTerms`): for the
        plugins whose answer on a node is a count its pods add up to. None (the default): the
        dry run asks `fits_without` node by node. Asked only when `filter` constrains the pod."""
        return None


class ReservePlugin(Plugin[ArgsT]):
    """Holds, on the chosen node, what the plugin's filter found there (kube's Reserve), so the next
    pod does not take it while this one is being bound: e.g. the volumes VolumeBinding will bind,
    assumed in the catalog. A filter plugin that is also a ReservePlugin is reserved for every pod
    placed (and unreserved when its binding fails); what `reserve` returns travels with the
    decision (`Decision.reservations[name]`) to whatever binds the pod."""

    @abstractmethod
    def reserve(self, pod: PodInfo, cluster: ClusterState, node: str) -> Any:
        """Assume what the pod needs on `node`; None when there is nothing to hold."""

    def unreserve(self, pod: PodInfo, cluster: ClusterState, reservation: Any) -> None:
        """Undo `reserve` (the binding failed or was abandoned)."""


@dataclass(frozen=True, slots=True)
class Preemption:
    """Where a pod may go once `victims` (lower-priority pods of that node) are evicted."""

    node: str
    victims: tuple[PodInfo, ...]
    #: lower-priority pods nominated to that node before, whose nomination no longer holds
    displaced: tuple[str, ...] = ()


class EvictionCheck:
    """The profile's filters on preemption's candidate nodes as pods are evicted there (what kube's
    SelectVictimsOnNode asks per node, per victim), for all the candidates at once: the filters
    evictions cannot change as one verdict per node (`passes`); the resolvable filters with
    `EvictionTerms` as one table of shortfalls (`covered`); the other resolvable filters node by
    node (`node_fits`)."""

    __slots__ = ("_terms", "node_fits", "passes", "shortfall", "slots")

    def __init__(
        self,
        slots: np.ndarray,
        passes: np.ndarray,
        terms: Sequence[EvictionTerms] = (),
        node_fits: Callable[[int, Sequence[PodRecord]], bool] | None = None,
    ) -> None:
        self.slots = slots
        self.passes = passes  # bool per candidate
        self._terms = tuple(terms)
        self.shortfall = (
            np.hstack([t.shortfall for t in self._terms]) if self._terms else np.zeros((len(slots), 0), dtype=np.int64)
        )
        #: (slot, pods gone) -> whether the filters without terms let the pod there; None: there are none
        self.node_fits = node_fits

    @property
    def width(self) -> int:
        """How many quantities the terms count."""
        return int(self.shortfall.shape[1])

    def frees(self, pod: PodInfo) -> list[int]:
        """What evicting `pod` frees of each quantity."""
        if len(self._terms) == 1:
            return list(self._terms[0].frees(pod))
        row: list[int] = []
        for terms in self._terms:
            row.extend(terms.frees(pod))
        return row

    @property
    def frees_key(self) -> Hashable | None:
        """What `frees` depends on besides the victim, None when the terms cannot say."""
        keys = tuple(terms.frees_key for terms in self._terms)
        return None if None in keys else keys

    def frees_below(self, priority: int) -> np.ndarray | None:
        """(candidates, quantities): what evicting every pod below `priority` frees on each candidate;
        None when some filter's terms cannot tell without visiting the pods."""
        parts = []
        for terms in self._terms:
            if terms.frees_below is None:
                return None
            parts.append(terms.frees_below(priority))
        return np.hstack(parts) if parts else np.zeros((len(self.slots), 0), dtype=np.int64)

    def covered(self, positions: np.ndarray | slice, freed: np.ndarray) -> np.ndarray:
        """Per candidate at `positions`: whether `freed` (one row each) covers its every shortfall."""
        return (self.shortfall[positions] <= freed).all(axis=1)


@dataclass(slots=True)
class PostFilterContext:
    """What a PostFilter plugin gets from the runtime when no node fits (kube's `NodeToStatusMap`
    and framework handle): the nodes evicting pods may help, in the order to try them, how many
    nodes there are, and the profile's filters on one node with some pods gone."""

    candidates: np.ndarray  # slots rejected only by resolvable filters, in node-tree order
    all_nodes: int
    #: (slot, pods gone) -> None when the pod fits there, else that node's reasons
    check: Callable[[int, Sequence[PodRecord]], list[str] | None]
    #: a cheaper yes/no of `check`, for the many tries of picking victims
    fits: Callable[[int, Sequence[PodRecord]], bool]
    #: the nodes the profile's filter of this name was run on (kube runs a node's filters until one
    #: fails: every earlier filter passed them); None when the profile has no such filter
    reached: Callable[[str], np.ndarray | None] = lambda name: None
    #: the filters on all the candidates at once, as evictions change them (`EvictionCheck`), for
    #: preemption's dry run; None: only `fits`, node by node
    evictions: Callable[[], EvictionCheck] | None = None


@dataclass(frozen=True, slots=True)
class PostFilterWrites:
    """A PostFilter's Unschedulable status that changed the cluster (kube's DynamicResources
    deallocating a claim, or deleting a stale one): `message` joins the other PostFilters' (kube's
    status reasons), the operator makes the `writes` (best effort, in order) whatever the later
    PostFilters find, and the pod is retried when the change comes back through the watch."""

    message: str
    writes: tuple[Write, ...] = ()


class PostFilterPlugin(Plugin[ArgsT]):
    """Runs when no node fits (kube's PostFilter): DefaultPreemption finds a node where evicting
    lower-priority pods makes room; DynamicResources frees a claim allocated where the pod cannot
    run. The runtime runs them in profile order until one nominates a node, and joins the others'
    messages with ", " (kube's `RunPostFilterPlugins`)."""

    @abstractmethod
    def post_filter(
        self, pod: PodInfo, cluster: ClusterState, context: PostFilterContext
    ) -> Preemption | PostFilterWrites | str:
        """A nomination, or why there is none: the sentence kube's FitError ends with
        (DefaultPreemption's `preemption: 0/5 nodes are available: ...`), with the writes made
        trying (`PostFilterWrites`)."""

    def clears_nomination(self, message: str) -> bool:
        """Whether a failure (`post_filter`'s message) drops the pod's nomination, if it has one
        (kube's PostFilterResult nominating nobody), rather than leave it as it is (kube's ModeNoop,
        e.g. a pod that may not preempt now)."""
        return True


class ScorePlugin(Plugin[ArgsT]):
    """Ranks the feasible nodes; the runtime multiplies by the profile's weight."""

    def pre_score(self, pod: PodInfo, cluster: ClusterState) -> bool:
        """False when the plugin does not apply to this pod: it then scores 0 everywhere."""
        return True

    @abstractmethod
    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        """Raw scores (int64 or float64), one per slot in `slots`."""

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        """Map raw scores onto 0..100; the default is for scores computed in that range."""
        return raw.astype(np.int64, copy=False)


# ----------------------------------------------------------------- placements (pod groups)


class PlacementError(Exception):
    """A placement plugin cannot answer (kube's Error status): the group is not decided."""


@dataclass(frozen=True, slots=True)
class Placement:
    """kube's `fwk.Placement`: a named set of nodes a pod group is tried on as a whole (a topology
    domain). `nodes` is a bool mask over slots; None stands for every node."""

    name: str
    nodes: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class PlacementAssignment:
    """kube's `PodGroupAssignments`: a placement in which the group fitted, the pods proposed there
    (pod, node) and how many of the group were scheduled (bound or assumed) before."""

    placement: Placement
    proposed: tuple[tuple[PodInfo, str], ...]
    scheduled_before: int


class PlacementGeneratePlugin(Plugin[ArgsT]):
    """kube's PlacementGenerate point (TopologyAwareWorkloadScheduling): the placements a pod
    group is tried in. The runtime uses the profile's first such plugin, as kube does."""

    @abstractmethod
    def generate_placements(self, group: Any, cluster: ClusterState, parent: Placement) -> list[Placement]:
        """The placements within `parent` for `group` (a `groups.PodGroupInfo`); raise
        `PlacementError` when they cannot be known. An empty list: no placement is feasible."""


class PlacementScorePlugin(Plugin[ArgsT]):
    """kube's PlacementScore point: ranks the placements a pod group fitted in (the runtime
    multiplies by the profile's weight; the highest total wins)."""

    @abstractmethod
    def score_placement(self, group: Any, cluster: ClusterState, assignment: PlacementAssignment) -> int:
        """The raw score of one placement."""

    def normalize_placement_scores(self, raw: list[int]) -> list[int]:
        """Map the raw scores onto 0..100 (kube's NormalizePlacementScore); identity by default."""
        return raw


# ----------------------------------------------------------------- Permit


class PermitCode(enum.Enum):
    ALLOW = "allow"
    WAIT = "wait"
    REJECT = "reject"


@dataclass(frozen=True, slots=True)
class Permit:
    """A PermitPlugin's answer for a pod on its node (kube's Permit status and timeout)."""

    code: PermitCode = PermitCode.ALLOW
    #: why it was rejected (one of kube's FitError reasons: `0/1 nodes are available: 1 <it>.`)
    message: str = ""
    #: how long a WAIT may last, in seconds (kube caps it at 15 minutes); then the pod is rejected
    timeout: float = 0.0
    #: the plugin that rejected (set by the runtime)
    plugin: str = ""
    #: a rejection that is no verdict on the pod (kube's Preempt of a waiting pod): it is retried
    #: with backoff rather than reported unschedulable
    error: bool = False

    @classmethod
    def wait(cls, timeout: float) -> Permit:
        return cls(PermitCode.WAIT, timeout=timeout)

    @classmethod
    def reject(cls, message: str) -> Permit:
        return cls(PermitCode.REJECT, message)

    @property
    def allowed(self) -> bool:
        return self.code is PermitCode.ALLOW


ALLOW = Permit()


def go_duration(seconds: float) -> str:
    """A duration as Go's `time.Duration.String` prints it (`10s`, `1m30s`, `500ms`), for kube's
    messages that quote one."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    sign, nanos = ("-", -nanos) if nanos < 0 else ("", nanos)
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= size:
                return sign + _trim(nanos / size) + unit
    hours, rest = divmod(nanos, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = _trim(rest / 1e9) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{text}"
    return f"{sign}{minutes}m{text}" if minutes else sign + text


def _trim(value: float) -> str:
    return f"{value:.9f}".rstrip("0").rstrip(".")


class WaitingPod:
    """A pod a PermitPlugin made wait (kube's `waitingPod`): assumed on its node, its binding held
    until every plugin in `pending` allows it, one rejects it, or the first wait times out."""

    __slots__ = ("node", "on_done", "outcome", "pending", "pod")

    def __init__(self, pod: PodInfo, node: str, pending: Mapping[str, float]) -> None:
        self.pod = pod
        self.node = node
        #: plugin name -> how long it lets the pod wait (seconds, from when the wait began)
        self.pending: dict[str, float] = dict(pending)
        self.outcome: Permit | None = None  # set once: allowed or rejected
        #: called once when the outcome is set (the operator wakes the pod's binding cycle)
        self.on_done: Callable[[], None] | None = None

    @property
    def done(self) -> bool:
        return self.outcome is not None

    def allow(self, plugin: str) -> None:
        """`plugin` lets the pod go; it is bound once no plugin holds it any more."""
        if self.outcome is None:
            self.pending.pop(plugin, None)
            if not self.pending:
                self._finish(ALLOW)

    def reject(self, plugin: str, message: str) -> bool:
        """The pod is unschedulable (after `message`); False when it was decided already."""
        return self._finish(Permit(PermitCode.REJECT, message, plugin=plugin))

    def preempt(self, plugin: str, message: str) -> bool:
        """The pod is sent back to the queue, not unschedulable (kube's `Preempt`, e.g. a victim)."""
        return self._finish(Permit(PermitCode.REJECT, message, plugin=plugin, error=True))

    def time_out(self) -> bool:
        """The earliest wait still pending is over: kube's timer rejects the pod."""
        if not self.pending:
            return False
        plugin, timeout = min(self.pending.items(), key=lambda item: item[1])
        return self.reject(plugin, f"rejected due to timeout after waiting {go_duration(timeout)} at plugin {plugin}")

    def deadline(self, started: float) -> float:
        """When the earliest pending wait ends, for a wait that began at `started`."""
        return started + min(self.pending.values(), default=0.0)

    def _finish(self, outcome: Permit) -> bool:
        if self.outcome is not None:
            return False
        self.outcome = outcome
        if self.on_done is not None:
            self.on_done()
        return True


class WaitingPods:
    """The pods waiting on Permit, by pod key (kube's `waitingPodsMap`): a PermitPlugin allows or
    rejects them from its `permit` of another pod or its `pod_updated`."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def get(self, key: str) -> WaitingPod | None:
        return self._pods.get(key)

    def __iter__(self) -> Iterator[WaitingPod]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, key: object) -> bool:
        return key in self._pods

    def add(self, waiting: WaitingPod) -> None:
        self._pods[waiting.pod.key] = waiting

    def remove(self, key: str) -> WaitingPod | None:
        return self._pods.pop(key, None)

    def waiting_on(self, plugin: str) -> list[WaitingPod]:
        """The undecided pods `plugin` still holds."""
        return [w for w in self._pods.values() if w.outcome is None and plugin in w.pending]


class PermitPlugin(Plugin[ArgsT]):
    """Decides whether a pod placed and reserved may be bound now (kube's Permit): allow, reject
    (the pod is unschedulable), or wait — e.g. until the rest of its group is placed. A waiting pod
    holds its node's room but no bind slot; another pod's `permit`, or `pod_updated`, releases it
    (`WaitingPod.allow`) or rejects it; its timeout rejects it too."""

    #: cluster events that may let a pod this plugin rejected go (as FilterPlugin.events)
    events: ClassVar[frozenset[str]] = frozenset({ClusterEvent.POD})

    @abstractmethod
    def permit(self, pod: PodInfo, cluster: ClusterState, node: str, waiting: WaitingPods) -> Permit:
        """Whether `pod`, reserved on `node`, may be bound: `ALLOW`, `Permit.wait(timeout)` or
        `Permit.reject(message)`. `waiting` holds the pods waiting now (of every plugin)."""

    def pod_updated(self, pod: PodInfo, cluster: ClusterState, waiting: WaitingPods) -> None:
        """A newer version of a pod came from the watch (any pod: a waiting one, or another) while
        this plugin holds pods: allow or reject those it holds. (A waiting pod deleted is rejected
        by the runtime.)"""

    def unpermit(self, pod: PodInfo, cluster: ClusterState, waiting: WaitingPods) -> None:
        """The pod will not be bound after all (rejected, timed out, or a later step of its binding
        failed): undo what `permit` counted, e.g. reject the rest of its group."""


# ----------------------------------------------------------------- PreBind and PostBind

# MERGE_PATCH, JSON_PATCH, STRATEGIC_MERGE_PATCH, ObjectRef and Write: placer.engine.writes


class PreBindError(Exception):
    """Raised by a `WaitFor.check` when the wait cannot succeed any more (kube's PreBind error):
    its message is the plugin's part of the FailedScheduling note."""


@dataclass(frozen=True, slots=True)
class Notice:
    """An event about the pod that a plugin's PreBind posts (kube's `EventRecorder().Eventf` from a
    plugin, e.g. DynamicResources' `BindingConditionsPending`): the operator sends it with its other
    events, regarding the pod, from the pod's scheduler."""

    reason: str
    action: str
    note: str
    type: str = "Normal"


@dataclass(frozen=True, slots=True)
class WaitFor:
    """Wait, after the writes, until `check` holds on the cluster the watches feed (never by polling
    the API server): it runs at every one of `events` (ClusterEvent names, catalog kinds) and once
    a second; True ends the wait, False keeps waiting, `PreBindError` fails it now."""

    #: (cluster, what the writes made: target -> the resourceVersion they left it at) -> done
    check: Callable[[ClusterState, Mapping[ObjectRef, str]], bool]
    events: frozenset[str]
    timeout: float | None = None  # seconds; None: the operator's default (kube's bindTimeoutSeconds)
    timeout_message: str = "timed out waiting for the condition"  # kube's wait.ErrWaitTimeout
    notice: Notice | None = None  # posted once, when the wait begins (after the writes)


@dataclass(frozen=True, slots=True)
class PreBind:
    """What a PreBindPlugin needs done before the pod is bound: writes in order, then a wait. Any
    failure undoes the writes that landed (their `undo`), latest first. A plan with neither is left
    out (kube's PreBindPreFlight Skip) unless `preflight` says the plugin's PreBind runs all the
    same (kube's PreBindPreFlight Success: DynamicResources for any pod with claims), which is what
    has the binding cycle set the pod's nominatedNodeName first (kube's NominatedNodeNameForExpectation)."""

    writes: tuple[Write, ...] = ()
    wait: WaitFor | None = None
    preflight: bool = False


class PreBindPlugin(Plugin[ArgsT]):
    """Makes what the pod needs exist before it is bound (kube's PreBind): e.g. VolumeBinding binds
    the volumes it reserved. Failures are reported as `running PreBind plugin "<name>": <message>`
    and the pod goes back to the queue, woken by `events`."""

    #: cluster events that may let a pod whose PreBind failed go (its backoff wake-ups)
    events: ClassVar[frozenset[str]] = frozenset({ClusterEvent.NODE})
    #: the operator's metrics for this plugin's PreBinds, if any: `placer_<metric>_total{result}`
    #: and `placer_<metric>_waiting` (their families are declared in `placer.controller.metrics`)
    metric: ClassVar[str] = ""

    @abstractmethod
    def pre_bind(self, pod: PodInfo, cluster: ClusterState, node: str, reservation: Any) -> PreBind | None:
        """What to write and wait for before binding `pod` to `node` (`reservation`: what this
        plugin's `reserve` returned, if it is a ReservePlugin); None when there is nothing to do
        (kube's PreBindPreFlight Skip: the pod is bound at once)."""


class PostBindPlugin(Plugin[ArgsT]):
    """Told that a pod was bound (kube's PostBind: informational, it cannot fail the binding)."""

    @abstractmethod
    def post_bind(self, pod: PodInfo, cluster: ClusterState, node: str) -> Sequence[Write]:
        """Writes to make now, best effort (failures are logged and counted, nothing is undone)."""


@dataclass(frozen=True, slots=True)
class BindingPoints:
    """A profile's plugins at each binding-cycle point, in profile order (filters, scores,
    postFilters; a plugin named in two lists counts once, with its first instance)."""

    reserves: tuple[ReservePlugin, ...] = ()
    permits: tuple[PermitPlugin, ...] = ()
    pre_binds: tuple[PreBindPlugin, ...] = ()
    post_binds: tuple[PostBindPlugin, ...] = ()
    by_name: Mapping[str, Plugin] = field(default_factory=dict)


def fit_error_message(all_nodes: int, reasons: Counter[str], pod_reason: str | None = None) -> str:
    """kube-scheduler's FitError: `0/5 nodes are available: 1 node(s) ..., 4 Insufficient cpu.`, or,
    when a PreFilter rejected the pod itself, `0/5 nodes are available: <that reason>.`"""
    if pod_reason is not None:
        return f"0/{all_nodes} nodes are available: {pod_reason}."
    pairs = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{all_nodes} nodes are available: {', '.join(pairs)}."


def default_normalize(raw: np.ndarray, reverse: bool = False) -> np.ndarray:
    """kube-scheduler's `helper.DefaultNormalizeScore`: scale by the maximum, optionally reversed."""
    raw = raw.astype(np.int64, copy=False)
    top = int(raw.max()) if raw.size else 0
    if top <= 0:
        return np.full(raw.shape, MAX_NODE_SCORE if reverse else 0, dtype=np.int64)
    scores = MAX_NODE_SCORE * raw // top
    return MAX_NODE_SCORE - scores if reverse else scores


def minmax_normalize(raw: np.ndarray) -> np.ndarray:
    """Placer's own plugins: the lowest raw value maps to 0, the highest to 100, rounding down.

    When every candidate has the same raw value the plugin cannot tell them apart, and each
    scores 0 (as a plugin that does not apply).
    """
    if raw.size == 0:
        return raw.astype(np.int64)
    low, high = raw.min(), raw.max()
    if high == low:
        return np.zeros(raw.shape, dtype=np.int64)
    if raw.dtype.kind in "iu":
        return (raw - low) * MAX_NODE_SCORE // (high - low)
    return np.floor((raw - low) * MAX_NODE_SCORE / (high - low)).astype(np.int64)


T = TypeVar("T")


class CycleMemo(Generic[T]):
    """One plugin's state for the pod being scheduled (kube's CycleState entry): computed once, then
    shared by its pre_filter, filter, reasons and score calls of that cycle. Valid while the pod is
    the same object and the cluster (pods, nodes, catalog) has not changed since."""

    __slots__ = ("_cluster", "_key", "_pod", "_value")

    def __init__(self) -> None:
        self._pod: PodInfo | None = None
        self._cluster: ClusterState | None = None
        self._key: tuple[int, int] = (-1, -1)
        self._value: T | None = None

    def get(self, pod: PodInfo, cluster: ClusterState) -> T | None:
        if (
            self._pod is pod
            and self._cluster is cluster
            and self._key == (cluster.version, cluster.catalog.revision)
        ):
            return self._value
        return None

    def put(self, pod: PodInfo, cluster: ClusterState, value: T) -> T:
        self._pod, self._cluster, self._value = pod, cluster, value
        self._key = (cluster.version, cluster.catalog.revision)
        return value


class StaticCache(Generic[T]):
    """Per-pod-shape results that depend only on node facts (labels, taints, metrics).

    Valid until the cluster's `static_version` moves; pods with the same selector or
    tolerations share one entry, so a backlog of similar pods costs one computation.
    """

    def __init__(self, limit: int = 512) -> None:
        self._version = -1
        self._cluster: weakref.ref[ClusterState] | None = None
        self._limit = limit
        self._entries: dict[Hashable, T] = {}

    def get(self, cluster: ClusterState, key: Hashable) -> T | None:
        # versions count per ClusterState: another cluster at the same version is not this one
        owner = self._cluster() if self._cluster is not None else None
        if cluster.static_version != self._version or owner is not cluster:
            self._entries.clear()
            self._version = cluster.static_version
            self._cluster = weakref.ref(cluster)
            return None
        return self._entries.get(key)

    def put(self, key: Hashable, value: T) -> T:
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[key] = value
        return value
