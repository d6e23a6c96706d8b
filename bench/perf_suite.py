"""kube-scheduler's own performance suite (`test/integration/scheduler_perf/` in the Kubernetes
source), read from kube's files at run time and turned into a plan a real control plane can run.

Nothing of kube's is copied here: `KubeSource` reads the suite's `performance-config.yaml` files and
templates from a Kubernetes tree — a folder, or a git directory such as the search tool's mirror of
openshift/microshift (`deps/github.com/openshift/kubernetes/` is found by itself) — and the feature
gates' defaults from its `pkg/features/kube_features.go`. Our own test cases in kube's format
(`bench/suite/`, e.g. preemption with PodDisruptionBudgets, which kube's suite does not have) are
read as if they were a folder `placer/` of the suite, so that their `../templates/...` are kube's.

The parts (all pure but the reading):

- `render`: the subset of Go's text/template kube's templates use (`{{.Index}}`, `{{.Count}}`,
  `{{DivideInt .Index 5}}`, `{{Mod .Index 25}}` and the other functions of kube's
  `getTemplateFuncs`); anything else is refused by name rather than rendered wrongly.
- `load_suite` / `parse_config`: the test cases, each with its ops (`workloadTemplate`) and its
  workloads (`params`, `labels`, `featureGates`, the test case's gates under the workload's).
- `choose`: which workload of a test case stands for a size (500 or 5,000 nodes): the one with
  that many nodes among those whose feature gates are the release's defaults and that kube does
  not keep for code coverage only (label `integration-test`) (kube's CI row,
  labelled `performance`, first; then the fewest measured pods); when the suite has none at that
  size (PreemptionBasic comments its 5,000-node row out, SchedulingDaemonset has only 15,000
  nodes), its largest such workload with every `countParam` scaled to the size, said in the name
  (`1000Nodes_QueueingHintsEnabled x0.5`); a test case whose node count is no parameter (one node,
  SchedulingWhileGated) is scaled against kube's CI size, 5,000.
- `build_plan`: the ops with their params substituted, as steps with the objects made: nodes
  named as kube's node preparer would (a fixed name, else the template's generateName and a
  number; `kubernetes.io/hostname` set; `labelNodePrepareStrategy` round-robin,
  `uniqueNodeLabelStrategy` unique values), pods named `<generateName><op>-<i>` unless the
  template names them, the namespaces kube's executor would use (`namespace-<op index>` by
  default), the ResourceSlices of `createResourceDriver` as kube's `resourceSlice` makes them, and
  the per-namespace counts kube's `barrier` waits for. An op this harness cannot run on a plane
  without kubelets or controllers raises `Unsupported` with the reason (volumes need kube's fake
  PV controller; `allocResourceClaims` with claims to allocate needs kube's allocator; nodes
  with CSI allocatable).
- `cannot_bind`: why a pod can never be bound here (scheduling gates, requests larger than every
  node's allocatable), so that a run can say "none that cannot be bound was bound".

Measured ops are the suite's: the `createPods` with `collectMetrics` (or a
`startCollectingMetrics`/`stopCollectingMetrics` window). bench/suite_bench.py runs the plans.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import math
import posixpath
import re
import subprocess
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml
from audit import pod_requests  # bench/audit.py (bench/ and the repository's root are on sys.path, as for it)

from tests.kubeemu.capacity import parse_quantity

Obj = dict[str, Any]
# libyaml's loader when PyYAML has it (about ten times faster: a 5,000-node workload renders 25,000 pods)
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

SUITE_DIR = "test/integration/scheduler_perf"
FEATURES_FILE = "pkg/features/kube_features.go"
CONFIG_NAME = "performance-config.yaml"
OVERLAY_NAME = "placer"  # bench/suite/ is read as the suite's folder `placer/`
OVERLAY = Path(__file__).resolve().parent / "suite"
# where a Kubernetes tree sits in the repositories that carry one (openshift/microshift: kube v1.36)
TREE_PREFIXES = ("", "deps/github.com/openshift/kubernetes/")
CI_NODES = 5000  # kube's CI size (the `performance` rows), for test cases whose node count is no parameter
MEASURED_LABEL = "performance"  # kube's CI rows ("long enough to provide meaningful samples")
COVERAGE_LABEL = "integration-test"  # kube's smallest rows, for code coverage: never a size here
# kube's makeBaseNode: the node of a createNodes op without a template
BASE_NODE_STATUS = {"capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"},
                    "allocatable": {"pods": "110", "cpu": "4", "memory": "32Gi"},
                    "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
# kube's makeBasePod (testutils.MakePodSpec): the pod of a createPods op without any template
BASE_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "pod-"}, "spec": {"containers": [{
    "name": "pause", "image": "registry.k8s.io/pause:3.10.1", "ports": [{"containerPort": 80}],
    "resources": {"limits": {"cpu": "100m", "memory": "500Mi"}, "requests": {"cpu": "100m", "memory": "500Mi"}}}]}}
CLUSTER_SCOPED = {"Node", "Namespace", "DeviceClass", "ResourceSlice", "DeviceTaintRule", "PriorityClass",
                  "PersistentVolume", "StorageClass", "CSINode", "CSIDriver", "ClusterRole", "ClusterRoleBinding"}


class SuiteError(Exception):
    """The suite's files are missing or malformed (the message names the file and the entry)."""


class Unsupported(Exception):
    """A test case or an op this harness cannot run on a plane without kubelets (the reason)."""


# -- the Kubernetes source --------------------------------------------------------------------------


class KubeSource:
    """A Kubernetes source tree, read-only: a folder, or a git directory (bare, e.g. the mirror of
    openshift/microshift, whose tree sits under deps/github.com/openshift/kubernetes/). Files of the
    suite's folder `placer/` come from `overlay` (our own test cases in kube's format)."""

    def __init__(self, location: Path, overlay: Path | None = OVERLAY, rev: str = "HEAD") -> None:
        self.location = Path(location)
        self.overlay = overlay
        self.rev = rev
        self.git_dir: Path | None = None
        if not self.location.exists():
            raise SuiteError(f"{self.location}: no Kubernetes source there (give its location with --kube-source "
                             "or $KUBE_SOURCE: a Kubernetes tree, or a git directory holding one)")
        if (self.location / "HEAD").is_file() and (self.location / "objects").is_dir():
            self.git_dir = self.location
            self.commit = self._git("rev-parse", rev).strip()
            found = [p for p in TREE_PREFIXES if self._git_ok("cat-file", "-e", f"{rev}:{p}{SUITE_DIR}")]
        else:
            self.commit = ""
            found = [p for p in TREE_PREFIXES if (self.location / p / SUITE_DIR).is_dir()]
        if not found:
            raise SuiteError(f"{self.location}: no {SUITE_DIR} in it (looked under "
                             f"{', '.join(repr(p or '/') for p in TREE_PREFIXES)})")
        self.prefix = found[0]

    def _git(self, *args: str) -> str:
        done = subprocess.run(["git", f"--git-dir={self.git_dir}", *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise SuiteError(f"git {' '.join(args)} in {self.git_dir}: {done.stderr.strip()}")
        return done.stdout

    def _git_ok(self, *args: str) -> bool:
        return subprocess.run(["git", f"--git-dir={self.git_dir}", *args], capture_output=True).returncode == 0

    def _overlay_path(self, path: str) -> Path | None:
        inside = f"{SUITE_DIR}/{OVERLAY_NAME}/"
        if self.overlay is not None and path.startswith(inside):
            return self.overlay / path[len(inside):]
        return None

    def read(self, path: str) -> str:
        """A file by its path in the Kubernetes tree (`test/integration/scheduler_perf/...`)."""
        local = self._overlay_path(path)
        if local is not None:
            if not local.is_file():
                raise SuiteError(f"{path}: no such file ({local})")
            return local.read_text()
        if self.git_dir is not None:
            try:
                return self._git("show", f"{self.rev}:{self.prefix}{path}")
            except SuiteError as error:
                raise SuiteError(f"{path}: not in {self.git_dir} at {self.rev}") from error
        file = self.location / self.prefix / path
        if not file.is_file():
            raise SuiteError(f"{path}: no such file in {self.location}")
        return file.read_text()

    def config_files(self) -> list[str]:
        """Every performance-config.yaml of the suite (kube's folders, then ours), sorted."""
        if self.git_dir is not None:
            names = self._git("ls-tree", "-r", "--name-only", self.rev, "--", f"{self.prefix}{SUITE_DIR}").split()
            found = [n[len(self.prefix):] for n in names if n.endswith(f"/{CONFIG_NAME}")]
        else:
            root = self.location / self.prefix
            found = [str(p.relative_to(root)) for p in (root / SUITE_DIR).rglob(CONFIG_NAME)]
        found = [f for f in found if not f.startswith(f"{SUITE_DIR}/{OVERLAY_NAME}/")]
        if self.overlay is not None and (self.overlay / CONFIG_NAME).is_file():
            found.append(f"{SUITE_DIR}/{OVERLAY_NAME}/{CONFIG_NAME}")
        return sorted(found)

    def describe(self) -> dict[str, str]:
        return {"location": str(self.location), "rev": self.rev, "commit": self.commit, "tree": self.prefix or "/"}


# -- feature gates ----------------------------------------------------------------------------------

_GATE = re.compile(r"^\t(\w+): \{\s*$")
_SPEC = re.compile(r'\{Version: version\.MustParse\("(\d+)\.(\d+)"\), Default: (true|false)')


def feature_defaults(features_go: str, minor: int) -> dict[str, bool]:
    """Each gate's default at Kubernetes 1.<minor>, from kube_features.go's versioned specs (the
    last spec whose version is not newer); a gate all of whose specs are newer is left out."""
    defaults: dict[str, bool] = {}
    gate: str | None = None
    for line in features_go.splitlines():
        start = _GATE.match(line)
        if start:
            gate = start.group(1)
            continue
        if gate is None:
            continue
        if line.strip() == "},":
            gate = None
            continue
        spec = _SPEC.search(line)
        if spec and int(spec.group(1)) == 1 and int(spec.group(2)) <= minor:
            defaults[gate] = spec.group(3) == "true"
    return defaults


# -- Go templates -----------------------------------------------------------------------------------


def _number(value: Any) -> float:
    if isinstance(value, bool):
        raise SuiteError(f"not a number: {value!r}")
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise SuiteError(f"not a number: {value!r}") from None


def _go_int(value: float) -> int:
    return int(value)  # Go's int(float64) truncates toward zero, as Python's int()


def _divide(a: Any, b: Any) -> float:
    if _number(b) == 0:
        raise SuiteError("division by zero in a template")
    return _number(a) / _number(b)


def _mod(a: Any, b: Any) -> int:
    divisor = _go_int(_number(b))
    if divisor == 0:
        raise SuiteError("Mod by zero in a template")
    return _go_int(math.fmod(_go_int(_number(a)), divisor))  # Go's %: the dividend's sign


# kube's getTemplateFuncs (operations.go), by name
TEMPLATE_FUNCTIONS: dict[str, Callable[..., float | int]] = {
    "AddFloat": lambda *xs: sum(_number(x) for x in xs),
    "AddInt": lambda *xs: _go_int(sum(_number(x) for x in xs)),
    "SubtractFloat": lambda a, b: _number(a) - _number(b),
    "SubtractInt": lambda a, b: _go_int(_number(a) - _number(b)),
    "MultiplyFloat": lambda *xs: math.prod(_number(x) for x in xs),
    "MultiplyInt": lambda *xs: _go_int(math.prod(_number(x) for x in xs)),
    "DivideFloat": _divide,
    "DivideInt": lambda a, b: _go_int(_divide(a, b)),
    "Mod": _mod,
}
_ACTION = re.compile(r"\{\{(.*?)\}\}", re.S)
_INTEGER = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?(\d+\.\d*|\.\d+)([eE][-+]?\d+)?")


def _go_format(value: Any) -> str:
    """How Go's text/template prints a value (a float64 without its fraction prints as an integer)."""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    return str(value)


def render(text: str, index: int, count: int, where: str = "template") -> str:
    """kube's templates rendered for one object: `.Index`, `.Count`, numbers and TEMPLATE_FUNCTIONS."""
    env = {".Index": index, ".Count": count}

    def argument(token: str) -> Any:
        if token in env:
            return env[token]
        if _INTEGER.fullmatch(token):
            return int(token)
        if _FLOAT.fullmatch(token):
            return float(token)
        raise SuiteError(f"{where}: unsupported template argument {token!r}")

    def action(match: re.Match[str]) -> str:
        body = match.group(1)
        if body.startswith("-") or body.endswith("-") or any(c in body for c in "|()$\""):
            raise SuiteError(f"{where}: unsupported template action {match.group(0)!r}")
        words = body.split()
        if not words:
            raise SuiteError(f"{where}: empty template action")
        if len(words) == 1:
            return _go_format(argument(words[0]))
        function = TEMPLATE_FUNCTIONS.get(words[0])
        if function is None:
            raise SuiteError(f"{where}: unsupported template function {words[0]!r}")
        try:
            return _go_format(function(*(argument(w) for w in words[1:])))
        except TypeError as error:
            raise SuiteError(f"{where}: {words[0]}: {error}") from None

    return _ACTION.sub(action, text)


class ObjectTemplate:
    """One object file of the suite, rendered per index (parsed once when it has no action)."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        self._static: Obj | None = None
        if "{{" not in text:
            self._static = self._parse(text)

    def _parse(self, text: str) -> Obj:
        try:
            obj = yaml.load(text, Loader=YAML_LOADER)  # a safe loader (CSafeLoader or SafeLoader)
        except yaml.YAMLError as error:
            raise SuiteError(f"{self.path}: not YAML: {error}") from None
        if not isinstance(obj, dict):
            raise SuiteError(f"{self.path}: not an object")
        return obj

    def make(self, index: int = 0, count: int = 1) -> Obj:
        if self._static is not None:
            return copy.deepcopy(self._static)
        return self._parse(render(self.text, index, count, self.path))


# -- test cases -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """One entry of a test case's `workloads:`."""

    name: str
    params: Mapping[str, Any]
    labels: tuple[str, ...] = ()
    feature_gates: Mapping[str, bool] = field(default_factory=dict)  # the test case's with these on top


@dataclass(frozen=True)
class TestCase:
    """One test case of a performance-config.yaml."""

    __test__ = False  # not a pytest class

    name: str
    config: str  # its file's path in the Kubernetes tree
    ops: tuple[Mapping[str, Any], ...]
    workloads: tuple[Workload, ...]
    default_pod_template: str | None = None  # a path in the Kubernetes tree

    def workload(self, name: str) -> Workload:
        for workload in self.workloads:
            if workload.name == name:
                return workload
        raise SuiteError(f"{self.name}: no workload {name!r} (it has {', '.join(w.name for w in self.workloads)})")


def suite_path(config: str, relative: str) -> str:
    """A template path of a config file, in the Kubernetes tree (kube reads them relative to the
    folder of the config file: its test runs there)."""
    return posixpath.normpath(posixpath.join(posixpath.dirname(config), relative))


def _gates(raw: Any, where: str) -> dict[str, bool]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(v, bool) for v in raw.values()):
        raise SuiteError(f"{where}: featureGates must map gate names to true/false")
    return {str(k): v for k, v in raw.items()}


def parse_config(text: str, config: str) -> list[TestCase]:
    """The test cases of one performance-config.yaml (`config`: its path in the Kubernetes tree)."""
    try:
        entries = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise SuiteError(f"{config}: not YAML: {error}") from None
    if not isinstance(entries, list):
        raise SuiteError(f"{config}: a list of test cases expected")
    cases = []
    for number, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise SuiteError(f"{config}: test case {number}: no name")
        where = f"{config}: {entry['name']}"
        ops = entry.get("workloadTemplate")
        if not isinstance(ops, list) or not all(isinstance(op, dict) and "opcode" in op for op in ops):
            raise SuiteError(f"{where}: workloadTemplate must be a list of ops with an opcode")
        case_gates = _gates(entry.get("featureGates"), where)
        workloads = []
        for raw in entry.get("workloads") or []:
            if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
                raise SuiteError(f"{where}: a workload without a name")
            params = raw.get("params") or {}
            if not isinstance(params, dict):
                raise SuiteError(f"{where}/{raw['name']}: params must be a mapping")
            workloads.append(Workload(
                name=raw["name"], params=dict(params), labels=tuple(raw.get("labels") or ()),
                feature_gates=case_gates | _gates(raw.get("featureGates"), f"{where}/{raw['name']}")))
        default = entry.get("defaultPodTemplatePath")
        cases.append(TestCase(name=entry["name"], config=config, ops=tuple(ops), workloads=tuple(workloads),
                              default_pod_template=suite_path(config, default) if default else None))
    return cases


def load_suite(source: KubeSource) -> dict[str, TestCase]:
    """Every test case of the suite by name (kube's files, then ours)."""
    suite: dict[str, TestCase] = {}
    for config in source.config_files():
        for case in parse_config(source.read(config), config):
            if case.name in suite:
                raise SuiteError(f"{config}: test case {case.name} also in {suite[case.name].config}")
            suite[case.name] = case
    if not suite:
        raise SuiteError(f"{source.location}: no test case in {SUITE_DIR}")
    return suite


# -- params -----------------------------------------------------------------------------------------


def _param(params: Mapping[str, Any], ref: Any, where: str) -> Any:
    if not isinstance(ref, str) or not ref.startswith("$"):
        raise SuiteError(f"{where}: a parameter reference starts with $ (got {ref!r})")
    if ref[1:] not in params:
        raise SuiteError(f"{where}: parameter {ref} is not in the workload's params")
    return params[ref[1:]]


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) or value < 0:
        raise SuiteError(f"{where}: a count must be a whole number >= 0 (got {value!r})")
    return int(value)


def op_count(op: Mapping[str, Any], params: Mapping[str, Any], where: str, default: int = 0,
             key: str = "count") -> int:
    """An op's count: `<key>Param` (a $reference into params) wins over `<key>`, as kube's patchParams."""
    if op.get(f"{key}Param"):
        return _int(_param(params, op[f"{key}Param"], where), where)
    return _int(op.get(key, default), where)


def count_params(ops: Iterable[Mapping[str, Any]]) -> set[str]:
    """The params the ops use as counts (`countParam`, also inside createPodSets' createPodsOp)."""
    names: set[str] = set()
    for op in ops:
        if isinstance(op.get("countParam"), str) and op["countParam"].startswith("$"):
            names.add(op["countParam"][1:])
        nested = op.get("createPodsOp")
        if isinstance(nested, dict):
            names |= count_params([nested])
    return names


def scale_params(params: Mapping[str, Any], names: Iterable[str], factor: float) -> dict[str, Any]:
    """`params` with the counts among `names` scaled (rounded; a count > 0 stays >= 1)."""
    scaled = dict(params)
    for name in names:
        value = scaled.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            scaled[name] = max(1, round(value * factor))
    return scaled


def node_count(case: TestCase, params: Mapping[str, Any]) -> int:
    """The nodes a workload starts with: its createNodes ops' counts."""
    return sum(op_count(op, params, f"{case.name}: createNodes") for op in case.ops if op["opcode"] == "createNodes")


def measured_count(case: TestCase, params: Mapping[str, Any]) -> int:
    """How many pods the measured createPods op creates (0 for a measurement window instead)."""
    total = 0
    for op in case.ops:
        if op["opcode"] == "createPods" and op.get("collectMetrics"):
            total += op_count(op, params, f"{case.name}: createPods")
        elif op["opcode"] == "createPodSets" and (op.get("createPodsOp") or {}).get("collectMetrics"):
            total += op_count(op, params, case.name) * op_count(op["createPodsOp"], params, case.name)
    return total


def gates_off_default(workload: Workload, defaults: Mapping[str, bool]) -> dict[str, bool]:
    """The workload's feature gates that are not the release's defaults (unknown gates included)."""
    return {gate: value for gate, value in workload.feature_gates.items() if defaults.get(gate) is not value}


@dataclass(frozen=True)
class Choice:
    """The workload standing for a size, with its params (scaled when the suite has no such row)."""

    case: TestCase
    workload: Workload
    params: Mapping[str, Any]
    scale: float  # 1.0: kube's own row
    nodes: int  # the nodes the plan creates

    @property
    def name(self) -> str:
        return self.workload.name if self.scale == 1.0 else f"{self.workload.name} x{self.scale:g}"


def choose(case: TestCase, nodes: int, defaults: Mapping[str, bool], scale: float = 1.0,
           workload: str | None = None) -> Choice:
    """The workload of `case` for a size of `nodes` (the module's docstring says how), or the named
    one; `scale` shrinks it further (a small run to check that a workload runs at all)."""
    if workload is not None:
        chosen, factor = case.workload(workload), 1.0
    else:
        sized = [w for w in case.workloads if COVERAGE_LABEL not in w.labels]
        if not sized:
            raise Unsupported(f"kube runs {case.name} as an integration test only (every workload is labelled "
                              f"{COVERAGE_LABEL}: no performance size)")
        usable = [w for w in sized if not gates_off_default(w, defaults)]
        if not usable:
            gates = {g: v for w in sized for g, v in gates_off_default(w, defaults).items()}
            raise Unsupported(f"every workload of {case.name} sets feature gates off their defaults ({gates})")
        sizes = {w.name: node_count(case, w.params) for w in usable}

        def rank(w: Workload) -> tuple[int, int]:
            return (0 if MEASURED_LABEL in w.labels else 1, measured_count(case, w.params))

        exact = [w for w in usable if sizes[w.name] == nodes]
        if exact:
            chosen, factor = min(exact, key=rank), 1.0
        elif any(op["opcode"] == "createNodes" and op.get("countParam") for op in case.ops):
            largest = max(sizes.values())
            chosen = min((w for w in usable if sizes[w.name] == largest), key=rank)
            factor = nodes / largest
        else:  # the node count is no parameter (one node, SchedulingWhileGated): sized against kube's CI rows
            chosen = min(usable, key=lambda w: (rank(w)[0], -measured_count(case, w.params)))
            factor = nodes / CI_NODES
    factor *= scale
    params = scale_params(chosen.params, count_params(case.ops), factor) if factor != 1.0 else dict(chosen.params)
    return Choice(case=case, workload=chosen, params=params, scale=round(factor, 6),
                  nodes=node_count(case, params))


# -- plans ------------------------------------------------------------------------------------------


@dataclass
class PodSet:
    """The pods of one createPods op (or of one namespace of a createPodSets op)."""

    op: int
    namespace: str
    template: ObjectTemplate
    count: int
    measured: bool = False
    wait: bool = True  # kube waits until every pod is bound (not skipWaitToCompletion, not steady)
    steady_seconds: float | None = None  # steadyState: `count` pods kept, bound ones replaced, for so long

    def pod(self, index: int, batch: int | None = None) -> Obj:
        """Pod `index` (of steady state's batch `batch`), named and in its namespace."""
        pod = self.template.make(index, self.count)
        meta = pod.setdefault("metadata", {})
        if not meta.get("name") or batch is not None:
            stem = meta.get("generateName") or (meta.get("name", "pod") + "-")
            meta["name"] = f"{stem}{self.op}-{index}" if batch is None else f"{stem}{self.op}-{batch}-{index}"
        meta.pop("generateName", None)
        meta["namespace"] = self.namespace
        pod.setdefault("apiVersion", "v1")
        pod.setdefault("kind", "Pod")
        return pod

    def pods(self) -> list[Obj]:
        return [self.pod(i) for i in range(self.count)]


@dataclass
class CreateNodes:
    nodes: list[Obj]


@dataclass
class CreateNamespaces:
    namespaces: list[Obj]


@dataclass
class CreateObjects:
    objects: list[Obj]  # each with metadata.namespace when namespaced


@dataclass
class CreatePods:
    sets: list[PodSet]


@dataclass
class Churn:
    op: int
    mode: str  # create | recreate
    number: int  # create: how many rounds at most (0: no end); recreate: how many of each kept
    interval_s: float
    namespace: str
    templates: list[Obj]


@dataclass
class Barrier:
    expected: dict[str, int]  # namespace -> pods to wait for
    stage: str  # Scheduled | Attempted
    selector: dict[str, str]


@dataclass
class Sleep:
    seconds: float


@dataclass
class DeletePods:
    namespace: str
    selector: dict[str, str]
    per_second: int  # 0: all at once
    wait: bool


@dataclass
class UpdateObjects:
    template: ObjectTemplate
    namespace: str | None
    count: int
    per_second: int
    subresources: list[str]


@dataclass
class StartMeasure:
    namespaces: list[str]
    selector: dict[str, str]


@dataclass
class StopMeasure:
    pass


Step = (CreateNodes | CreateNamespaces | CreateObjects | CreatePods | Churn | Barrier | Sleep | DeletePods
        | UpdateObjects | StartMeasure | StopMeasure)


@dataclass
class Plan:
    """A workload's steps, in order, with what a run needs to know of them."""

    choice: Choice
    steps: list[Step]
    nodes: list[Obj]  # every node of the createNodes ops
    api_versions: set[str]  # of every object made (the API server must serve them)

    @property
    def measured(self) -> list[PodSet]:
        return [s for step in self.steps if isinstance(step, CreatePods) for s in step.sets if s.measured]

    def claim_templates(self) -> dict[tuple[str, str], Obj]:
        """(namespace, name) -> ResourceClaimTemplate created by the plan."""
        return {(o["metadata"]["namespace"], o["metadata"]["name"]): o for step in self.steps
                if isinstance(step, CreateObjects) for o in step.objects if o.get("kind") == "ResourceClaimTemplate"}

    def waiting_unsupported(self) -> str | None:
        """Why the measured pods cannot be created while the scheduler waits (None: they can): a
        steady state or a measurement window spans the scheduler's own work."""
        if any(isinstance(step, StartMeasure) for step in self.steps):
            return "its measurement is a window over several ops, which need the scheduler running"
        if any(s.steady_seconds is not None for s in self.measured):
            return "its measured pods are a steady state (created as others are bound)"
        return None


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(text: Any, where: str) -> float:
    """Seconds of a Go duration ("10s", "1m30s", "500ms")."""
    text = str(text)
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise SuiteError(f"{where}: not a duration: {text!r}")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def rest_collection(obj: Mapping[str, Any], namespace: str | None = None) -> str:
    """The collection an object is POSTed to (`/api/v1/...` or `/apis/<group>/<version>/...`)."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        raise SuiteError(f"an object without apiVersion and kind: {json.dumps(obj)[:200]}")
    lower = kind.lower()
    plural = lower + "es" if lower.endswith("s") else lower[:-1] + "ies" if lower.endswith("y") else lower + "s"
    root = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{root}/namespaces/{namespace}/{plural}" if namespace else f"{root}/{plural}"


def resource_slice(driver: str, node: str, devices: int) -> Obj:
    """The ResourceSlice kube's createResourceDriver publishes for a node (dra.go's resourceSlice):
    `devices` devices `instance-<i>`, each with model/family/driverVersion/numa and 1Gi of memory."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": node},
            "spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "resourceSliceCount": 1},
                     "devices": [{"name": f"instance-{i}",
                                  "attributes": {"model": {"string": "A100"}, "family": {"string": "GPU"},
                                                 "driverVersion": {"version": "1.2.3"},
                                                 "dra.example.com/numa": {"int": i}},
                                  "capacity": {"memory": {"value": "1Gi"}}} for i in range(devices)]}}


class _Planner:
    """Builds a Plan op by op, tracking what kube's executor tracks (nodes so far, namespaces,
    the counts barriers wait for)."""

    def __init__(self, source: KubeSource, choice: Choice) -> None:
        self.source = source
        self.choice = choice
        self.case = choice.case
        self.params = choice.params
        self.steps: list[Step] = []
        self.nodes: list[Obj] = []
        self.namespaces: set[str] = set()
        self.waiting: dict[str, int] = {}  # kube's numPodsScheduledPerNamespace
        self.claims: dict[str, int] = {}  # namespace -> ResourceClaims created there
        self.api_versions: set[str] = set()
        self._templates: dict[str, ObjectTemplate] = {}

    def template(self, relative: str) -> ObjectTemplate:
        return self.template_at(suite_path(self.case.config, relative))

    def template_at(self, path: str) -> ObjectTemplate:
        if path not in self._templates:
            self._templates[path] = ObjectTemplate(path, self.source.read(path))
        return self._templates[path]

    def namespace(self, name: str, template: Obj | None = None) -> None:
        if name in self.namespaces:
            return
        self.namespaces.add(name)
        self.waiting.setdefault(name, 0)
        obj = copy.deepcopy(template) if template else {"apiVersion": "v1", "kind": "Namespace", "metadata": {}}
        obj.setdefault("apiVersion", "v1")
        obj.setdefault("kind", "Namespace")
        obj.setdefault("metadata", {})["name"] = name
        if self.steps and isinstance(self.steps[-1], CreateNamespaces):
            self.steps[-1].namespaces.append(obj)
        else:
            self.steps.append(CreateNamespaces([obj]))

    def plan(self) -> Plan:
        for index, op in enumerate(self.case.ops):
            opcode = op["opcode"]
            where = f"{self.case.name}/{self.choice.name}: op {index} ({opcode})"
            handler = getattr(self, f"op_{opcode}", None)
            if handler is None:
                raise Unsupported(f"{where}: opcode {opcode} is not run by this harness")
            handler(index, op, where)
        if not self.measured_ops():
            raise Unsupported(f"{self.case.name}: nothing measured (no createPods with collectMetrics, no "
                              "startCollectingMetrics)")
        return Plan(choice=self.choice, steps=self.steps, nodes=self.nodes, api_versions=self.api_versions)

    def measured_ops(self) -> list[Step]:
        return [s for s in self.steps if isinstance(s, StartMeasure)
                or (isinstance(s, CreatePods) and any(p.measured for p in s.sets))]

    def op_createNodes(self, index: int, op: Mapping[str, Any], where: str) -> None:
        count = op_count(op, self.params, where)
        if op.get("nodeAllocatableStrategy"):
            raise Unsupported(f"{where}: nodeAllocatableStrategy (CSINode allocatable) needs volume support")
        if op.get("nodeTemplatePath"):
            template = self.template(op["nodeTemplatePath"])
        else:
            base = {"apiVersion": "v1", "kind": "Node", "metadata": {"generateName": f"node-{index}-"},
                    "status": BASE_NODE_STATUS}
            template = ObjectTemplate("(kube's makeBaseNode)", json.dumps(base))
        label = op.get("labelNodePrepareStrategy") or {}
        unique = op.get("uniqueNodeLabelStrategy") or {}
        if label and not (label.get("labelKey") and label.get("labelValues")):
            raise SuiteError(f"{where}: labelNodePrepareStrategy needs labelKey and labelValues")
        made = []
        for i in range(count):
            node = template.make(i, count)
            meta = node.setdefault("metadata", {})
            if not meta.get("name"):
                meta["name"] = f"{meta.get('generateName', 'node-')}{len(self.nodes) + i}"
            meta.pop("generateName", None)
            labels = meta.setdefault("labels", {})
            labels["kubernetes.io/hostname"] = meta["name"]
            if label:
                labels[label["labelKey"]] = str(label["labelValues"][i % len(label["labelValues"])])
            if unique:
                labels[unique["labelKey"]] = str(uuid.uuid5(uuid.NAMESPACE_URL, meta["name"]))
            node.setdefault("apiVersion", "v1")
            node.setdefault("kind", "Node")
            made.append(node)
        names = [n["metadata"]["name"] for n in self.nodes + made]
        if len(set(names)) != len(names):
            raise SuiteError(f"{where}: two nodes named alike (a fixed name created more than once)")
        self.nodes.extend(made)
        self.steps.append(CreateNodes(made))

    def op_createNamespaces(self, index: int, op: Mapping[str, Any], where: str) -> None:
        count = op_count(op, self.params, where)
        template = self.template(op["namespaceTemplatePath"]).make() if op.get("namespaceTemplatePath") else None
        if not op.get("prefix"):
            raise SuiteError(f"{where}: no prefix")
        for i in range(count):
            self.namespace(f"{op['prefix']}-{i}", template)

    def _pod_set(self, index: int, op: Mapping[str, Any], where: str, namespace: str) -> PodSet:
        if op.get("persistentVolumeTemplatePath") or op.get("persistentVolumeClaimTemplatePath"):
            raise Unsupported(f"{where}: persistent volumes need the PV controller kube's suite fakes")
        if op.get("collectMetrics") and op.get("skipWaitToCompletion"):
            raise SuiteError(f"{where}: collectMetrics and skipWaitToCompletion together")
        steady = op.get("steadyState", False)
        if op.get("steadyStateParam"):
            steady = _param(self.params, op["steadyStateParam"], where)
        seconds = None
        if steady:
            duration = (_param(self.params, op["durationParam"], where) if op.get("durationParam")
                        else op.get("duration"))
            seconds = go_duration(duration, where)
            if seconds <= 0:
                raise SuiteError(f"{where}: a steady state needs a duration > 0")
        path = op.get("podTemplatePath") or None
        if path:
            template = self.template(path)
        elif self.case.default_pod_template:
            template = self.template_at(self.case.default_pod_template)
        else:
            template = ObjectTemplate("(kube's makeBasePod)", json.dumps(BASE_POD))
        self.namespace(namespace)
        pods = PodSet(op=index, namespace=namespace, template=template, count=op_count(op, self.params, where),
                      measured=bool(op.get("collectMetrics")),
                      wait=not op.get("skipWaitToCompletion") and not steady, steady_seconds=seconds)
        if op.get("skipWaitToCompletion"):
            self.waiting[namespace] = self.waiting.get(namespace, 0) + pods.count
        return pods

    def op_createPods(self, index: int, op: Mapping[str, Any], where: str) -> None:
        namespace = op.get("namespace") or f"namespace-{index}"
        pods = self._pod_set(index, op, where, namespace)
        if pods.measured and self.measured_ops():
            raise Unsupported(f"{where}: a second measured op (this harness measures one)")
        self.api_versions.add("v1")
        self.steps.append(CreatePods([pods]))

    def op_createPodSets(self, index: int, op: Mapping[str, Any], where: str) -> None:
        inner = op.get("createPodsOp")
        if not isinstance(inner, dict) or not op.get("namespacePrefix"):
            raise SuiteError(f"{where}: needs namespacePrefix and createPodsOp")
        sets = [self._pod_set(index, inner, where, f"{op['namespacePrefix']}-{i}")
                for i in range(op_count(op, self.params, where))]
        if any(s.measured for s in sets) and self.measured_ops():
            raise Unsupported(f"{where}: a second measured op (this harness measures one)")
        self.steps.append(CreatePods(sets))

    def _objects(self, template: ObjectTemplate, count: int, namespace: str | None, where: str) -> list[Obj]:
        objects = []
        for i in range(count):
            obj = template.make(i, count)
            meta = obj.setdefault("metadata", {})
            if not meta.get("name"):
                meta["name"] = f"{meta.get('generateName', 'object-')}{i}"
            meta.pop("generateName", None)
            namespaced = obj.get("kind") not in CLUSTER_SCOPED
            if namespaced and not namespace:
                raise SuiteError(f"{where}: namespace not set for a {obj.get('kind')}")
            if not namespaced and namespace:
                raise SuiteError(f"{where}: namespace {namespace!r} set for a cluster-scoped {obj.get('kind')}")
            if namespaced:
                meta["namespace"] = namespace
                if obj.get("kind") == "ResourceClaim":
                    self.claims[namespace] = self.claims.get(namespace, 0) + 1
            rest_collection(obj, namespace)  # apiVersion and kind are there
            self.api_versions.add(obj["apiVersion"])
            objects.append(obj)
        return objects

    def op_createAny(self, index: int, op: Mapping[str, Any], where: str) -> None:
        if not op.get("templatePath"):
            raise SuiteError(f"{where}: no templatePath")
        namespace = op.get("namespace") or None
        if namespace:
            self.namespace(namespace)
        count = op_count(op, self.params, where, default=1)
        self.steps.append(CreateObjects(self._objects(self.template(op["templatePath"]), count, namespace, where)))

    def op_createResourceClaims(self, index: int, op: Mapping[str, Any], where: str) -> None:
        if not op.get("namespace") or not op.get("templatePath"):
            raise SuiteError(f"{where}: needs namespace and templatePath")
        self.namespace(op["namespace"])
        template = self.template(op["templatePath"])
        self.steps.append(CreateObjects(self._objects(template, op_count(op, self.params, where), op["namespace"],
                                                      where)))

    def op_createResourceDriver(self, index: int, op: Mapping[str, Any], where: str) -> None:
        devices = op_count(op, self.params, where, key="maxClaimsPerNode")
        if not op.get("driverName") or not op.get("nodes"):
            raise SuiteError(f"{where}: needs driverName and nodes")
        names = [n["metadata"]["name"] for n in self.nodes if fnmatch.fnmatchcase(n["metadata"]["name"], op["nodes"])]
        slices = [resource_slice(op["driverName"], name, devices) for name in names]
        self.api_versions.add("resource.k8s.io/v1")
        if slices:
            self.steps.append(CreateObjects(slices))

    def op_allocResourceClaims(self, index: int, op: Mapping[str, Any], where: str) -> None:
        pending = self.claims.get(op.get("namespace") or "", 0)
        if pending:
            raise Unsupported(f"{where}: allocating {pending} claims beforehand needs kube's structured allocator")

    def op_churn(self, index: int, op: Mapping[str, Any], where: str) -> None:
        mode, number = op.get("mode"), _int(op.get("number", 0), where)
        if mode not in ("create", "recreate") or (mode == "recreate" and number == 0):
            raise SuiteError(f"{where}: mode must be create or recreate (recreate with a number > 0)")
        paths = op.get("templatePaths") or []
        if not paths:
            raise SuiteError(f"{where}: no templatePaths")
        namespace = op.get("namespace") or f"namespace-{index}"
        self.namespace(namespace)
        templates = []
        for path in paths:
            obj = self.template(path).make()
            self.api_versions.add(obj.get("apiVersion", "v1"))
            templates.append(obj)
        interval = float(op.get("intervalMilliseconds") or 500) / 1000
        self.steps.append(Churn(op=index, mode=mode, number=number, interval_s=interval, namespace=namespace,
                                templates=templates))

    def op_barrier(self, index: int, op: Mapping[str, Any], where: str) -> None:
        stage = op.get("stageRequirement") or "Scheduled"
        if stage not in ("Scheduled", "Attempted"):
            raise SuiteError(f"{where}: stageRequirement {stage!r}")
        namespaces = op.get("namespaces") or sorted(self.waiting)
        unknown = [n for n in namespaces if n not in self.waiting]
        if unknown:
            raise SuiteError(f"{where}: unknown namespaces {unknown}")
        self.steps.append(Barrier(expected={n: self.waiting[n] for n in namespaces}, stage=stage,
                                  selector=dict(op.get("labelSelector") or {})))
        if stage == "Scheduled":
            for namespace in namespaces:
                del self.waiting[namespace]

    def op_sleep(self, index: int, op: Mapping[str, Any], where: str) -> None:
        duration = _param(self.params, op["durationParam"], where) if op.get("durationParam") else op.get("duration")
        self.steps.append(Sleep(go_duration(duration, where)))

    def op_deletePods(self, index: int, op: Mapping[str, Any], where: str) -> None:
        if not op.get("namespace"):
            raise SuiteError(f"{where}: no namespace")
        per_second = _int(op.get("deletePodsPerSecond", 0), where)
        self.steps.append(DeletePods(namespace=op["namespace"], selector=dict(op.get("labelSelector") or {}),
                                     per_second=per_second, wait=not op.get("skipWaitToCompletion")))

    def op_updateAny(self, index: int, op: Mapping[str, Any], where: str) -> None:
        if not op.get("templatePath"):
            raise SuiteError(f"{where}: no templatePath")
        self.steps.append(UpdateObjects(template=self.template(op["templatePath"]), namespace=op.get("namespace"),
                                        count=op_count(op, self.params, where, default=1),
                                        per_second=_int(op.get("updatePerSecond", 0), where),
                                        subresources=list(op.get("subresources") or [])))

    def op_startCollectingMetrics(self, index: int, op: Mapping[str, Any], where: str) -> None:
        if self.measured_ops():
            raise Unsupported(f"{where}: a second measured op (this harness measures one)")
        if not op.get("namespaces"):
            raise SuiteError(f"{where}: no namespaces")
        self.steps.append(StartMeasure(namespaces=list(op["namespaces"]), selector=dict(op.get("labelSelector") or {})))

    def op_stopCollectingMetrics(self, index: int, op: Mapping[str, Any], where: str) -> None:
        if not any(isinstance(s, StartMeasure) for s in self.steps):
            raise SuiteError(f"{where}: no startCollectingMetrics before")
        self.steps.append(StopMeasure())


def build_plan(source: KubeSource, choice: Choice) -> Plan:
    """The steps of a chosen workload (raises Unsupported with the reason when this harness cannot
    run it, SuiteError when kube's files are malformed)."""
    return _Planner(source, choice).plan()


# -- what can never be bound ------------------------------------------------------------------------

RESOURCE_KEYS = ("cpu", "memory", "pods", "ephemeral-storage")


def largest_allocatable(nodes: Sequence[Obj]) -> dict[str, Fraction]:
    """Per resource, the most any node offers (its allocatable, else its capacity)."""
    most: dict[str, Fraction] = {}
    for node in nodes:
        status = node.get("status") or {}
        for key, value in (status.get("allocatable") or status.get("capacity") or {}).items():
            amount = parse_quantity(value)
            if amount > most.get(key, Fraction(-1)):
                most[key] = amount
    return most


def cannot_bind(pod: Obj, largest: Mapping[str, Fraction]) -> str | None:
    """Why `pod` can never be bound on these nodes (None: it may be): scheduling gates, or a
    request more than any node's allocatable (bench/audit.py's count of a pod's requests)."""
    if (pod.get("spec") or {}).get("schedulingGates"):
        return "scheduling gates"
    for key, amount in pod_requests(pod).items():
        if amount > 0 and (key in RESOURCE_KEYS or "/" in key) and amount > largest.get(key, Fraction(0)):
            return f"requests {key} beyond every node"
    return None
