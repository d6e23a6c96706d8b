#!/usr/bin/env bash
# The topology scenarios of docs/gang.md ("On a real v1.36.2 API server") against a real control
# plane: kube-scheduler v1.36 with the gates, or Placer, on racks of 4, 6 and 2 cpu, pods of 1 cpu.
#
#   KUBE_BIN=/work/kube-bin-1.36 hack/topology_check.sh kube     # kube-scheduler v1.36
#   KUBE_BIN=/work/kube-bin-1.36 hack/topology_check.sh placer   # this checkout's `placer run`
#
# Starts its own etcd (127.0.0.1:22379) and kube-apiserver (:26443) from a copy of
# ../shared/realcluster/realcluster.sh with those ports, so it does not disturb a control plane on
# the usual ones; stops everything it started on exit. Prints where each pod went, the PodGroups'
# conditions and the FailedScheduling notes: a gang of 5 (all in rack-b), a sixth pod (rack-b), a
# gang of 7 (none), then rack-c grown by a 6-cpu node (all 7 in rack-c). KEEP=1 keeps the logs.
# Not part of any test run.
set -euo pipefail
: "${KUBE_BIN:?set KUBE_BIN to the folder holding kube-apiserver and kube-scheduler (v1.36)}"
WHO=${1:?usage: topology_check.sh kube|placer}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${REALCLUSTER:-$ROOT/../shared/realcluster/realcluster.sh}
GATES=GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true,WorkloadAwarePreemption=true
WORK=$(mktemp -d /tmp/topology-check.XXXXXX)
export RC_DIR=$WORK/plane RC_PORT=26443 KUBECONFIG=$WORK/plane/admin.kubeconfig
export RC_APISERVER_ARGS="--feature-gates=$GATES --runtime-config=scheduling.k8s.io/v1alpha2=true"
sed -e 's/2379/22379/g; s/2380/22380/g' "$SHARED" > "$WORK/plane.sh"
chmod +x "$WORK/plane.sh"
SCHEDULER_PID=""
cleanup() {
  [ -n "$SCHEDULER_PID" ] && kill "$SCHEDULER_PID" 2>/dev/null || true
  "$WORK/plane.sh" down || true
  if [ -n "${KEEP:-}" ]; then echo "logs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
"$WORK/plane.sh" up

if [ "$WHO" = kube ]; then
  SCHED=kube-tas
  cat > "$WORK/scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: $KUBECONFIG, qps: 5000, burst: 10000}
leaderElection: {leaderElect: false}
profiles: [{schedulerName: $SCHED}]
EOF
  "$KUBE_BIN/kube-scheduler" --config="$WORK/scheduler.yaml" --feature-gates="$GATES" --secure-port=0 \
    > "$WORK/scheduler.log" 2>&1 &
  SCHEDULER_PID=$!
else
  SCHED=placer
  kubectl apply -f "$ROOT/crds/schedulerprofiles.placer.dev.yaml" >/dev/null
  kubectl wait --for=condition=Established crd/schedulerprofiles.placer.dev --timeout=60s >/dev/null
  kubectl apply -f - >/dev/null <<EOF
apiVersion: placer.dev/v1alpha1
kind: SchedulerProfile
metadata: {name: check}
spec: {schedulerName: $SCHED}
EOF
  POD_NAMESPACE=default "$ROOT/.venv/bin/placer" run --no-leader-elect --metrics-port 0 > "$WORK/placer.log" 2>&1 &
  SCHEDULER_PID=$!
fi
sleep 4

node() { # name rack cpu
  kubectl create -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata: {name: $1, labels: {kubernetes.io/hostname: $1, example.com/rack: $2}}
EOF
  kubectl patch node "$1" --subresource=status --type=merge -p "{\"status\":{\"allocatable\":{\"cpu\":\"$3\",\
\"memory\":\"8Gi\",\"pods\":\"110\"},\"capacity\":{\"cpu\":\"$3\",\"memory\":\"8Gi\",\"pods\":\"110\"},\"conditions\":\
[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",\"message\":\"ok\",\
\"lastHeartbeatTime\":\"2026-01-01T00:00:00Z\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}}" >/dev/null
}
group() { # name minCount
  kubectl -n check create -f - >/dev/null <<EOF
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: $1}
spec:
  schedulingPolicy: {gang: {minCount: $2}}
  schedulingConstraints: {topology: [{key: example.com/rack}]}
EOF
}
pod() { # name group
  kubectl -n check create -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  schedulerName: $SCHED
  schedulingGroup: {podGroupName: $2}
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
EOF
}
show() {
  echo "--- $1"
  kubectl -n check get pods -o custom-columns=POD:.metadata.name,NODE:.spec.nodeName --no-headers | sort
  kubectl -n check get podgroups -o jsonpath='{range .items[*]}{.metadata.name}: {.status.conditions[0].status}/{.status.conditions[0].reason} {.status.conditions[0].message}{"\n"}{end}'
}

for n in a1 a2; do node "$n" rack-a 2; done
for n in b1 b2 b3; do node "$n" rack-b 2; done
node c1 rack-c 2
kubectl create namespace check >/dev/null
group train 5
for i in 0 1 2 3 4; do pod "w$i" train; done
sleep 3; show "a gang of 5 (rack-b expected)"
pod w5 train
sleep 3; show "a sixth pod (rack-b expected)"
group big 7
for i in 0 1 2 3 4 5 6; do pod "p$i" big; done
sleep 5; show "a gang of 7 (none bound expected)"
echo "--- FailedScheduling notes"
kubectl -n check get events --field-selector reason=FailedScheduling \
  -o jsonpath='{range .items[*]}{.regarding.name}{.involvedObject.name}: {.note}{.message}{"\n"}{end}' | sort -u
node c2 rack-c 6
sleep 5; show "rack-c grown by 6 cpu (all 7 in rack-c expected)"
