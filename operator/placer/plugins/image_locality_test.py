"""ImageLocality against kube-scheduler's image_locality.go (v1.36, with its test rows): each
container's and `image` volume's image found on the node adds size * (nodes holding it / all nodes);
the sum is clamped to [23 MB, 1000 MB * containers] and mapped onto 0..100 with integer division."""

from __future__ import annotations

import pytest

from placer.engine.parsing import parse_node
from placer.engine.profile import ProfileError
from placer.testing import MiB, cluster_of, container, make_plugin, make_profile, node, pod, scores

IMAGES = make_plugin("ImageLocality")


def four_nodes(holders: dict[str, list[tuple[str, int]]]) -> list[dict]:
    return [node(name, images=holders.get(name, [])) for name in ("n1", "n2", "n3", "n4")]


def test_image_on_one_of_four_nodes_is_scaled_by_spread() -> None:
    cluster = cluster_of(four_nodes({"n1": [("nginx:1.25", 500 * MiB)]}))
    # 500 MB * 1/4 = 125 MB: 100 * (125 - 23) / (1000 - 23) = 10200 / 977 = 10
    assert scores(IMAGES, pod("p", image="nginx:1.25"), cluster) == {"n1": 10, "n2": 0, "n3": 0, "n4": 0}


def test_image_on_every_node_counts_fully() -> None:
    cluster = cluster_of(four_nodes({n: [("nginx:1.25", 500 * MiB)] for n in ("n1", "n2", "n3", "n4")}))
    # 500 MB * 4/4: 100 * 477 / 977 = 48
    assert set(scores(IMAGES, pod("p", image="nginx:1.25"), cluster).values()) == {48}


def test_below_the_lower_threshold_scores_zero() -> None:
    cluster = cluster_of(four_nodes({"n1": [("small:1", 80 * MiB)], "n2": [("small:1", 96 * MiB)]}))
    # n1: 80 MB * 2/4 = 40 MB -> 100 * 17 / 977 = 1; n2: 96 MB * 2/4 = 48 MB -> 100 * 25 / 977 = 2
    assert scores(IMAGES, pod("p", image="small:1"), cluster) == {"n1": 1, "n2": 2, "n3": 0, "n4": 0}
    cluster = cluster_of(four_nodes({"n1": [("small:1", 80 * MiB)]}))
    # 80 MB / 4 = 20 MB < 23 MB: clamped to 23 MB, score 0
    assert scores(IMAGES, pod("p", image="small:1"), cluster)["n1"] == 0


def test_above_the_upper_threshold_scores_100() -> None:
    cluster = cluster_of(four_nodes({n: [("huge:1", 2000 * MiB)] for n in ("n1", "n2", "n3", "n4")}))
    assert set(scores(IMAGES, pod("p", image="huge:1"), cluster).values()) == {100}


def test_threshold_grows_with_the_number_of_containers() -> None:
    everywhere = [("a:1", 1000 * MiB), ("b:1", 1000 * MiB)]
    cluster = cluster_of(
        [node("both", images=everywhere), node("one", images=everywhere[:1])]
    )
    two = pod("p", containers=[container("a", image="a:1"), container("b", image="b:1")])
    # both: a 1000 MB * 2/2 + b 1000 MB * 1/2 = 1500 MB; max threshold 2000 MB:
    #   100 * (1500 - 23) / (2000 - 23) = 147700 / 1977 = 74
    # one:  a only, 1000 MB: 100 * 977 / 1977 = 49
    assert scores(IMAGES, two, cluster) == {"both": 74, "one": 49}


def test_init_containers_count_in_the_sum_and_the_threshold() -> None:
    cluster = cluster_of([node("a", images=[("init:1", 1000 * MiB), ("main:1", 1000 * MiB)])])
    with_init = pod("p", containers=[container("m", image="main:1")], init_containers=[container("i", image="init:1")])
    assert scores(IMAGES, with_init, cluster) == {"a": 100}
    main_only = pod("p", containers=[container("m", image="main:1")], init_containers=[container("i", image="other:1")])
    # 1000 MB of a 2000 MB threshold: 100 * 977 / 1977 = 49
    assert scores(IMAGES, main_only, cluster) == {"a": 49}


def test_untagged_image_means_latest() -> None:
    cluster = cluster_of([node("a", images=[(["redis:latest", "docker.io/library/redis:latest"], 1000 * MiB)]),
                          node("b", images=[("registry:5000/app:latest", 1000 * MiB)])])
    # each image is on 1 of 2 nodes: 500 MB -> 100 * 477 / 977 = 48
    assert scores(IMAGES, pod("p", image="redis"), cluster) == {"a": 48, "b": 0}
    # a registry port is not a tag
    assert scores(IMAGES, pod("p", image="registry:5000/app"), cluster) == {"a": 0, "b": 48}
    # a different tag does not match
    assert scores(IMAGES, pod("p", image="redis:7"), cluster) == {"a": 0, "b": 0}


def test_spread_counts_every_node_not_just_the_feasible_ones() -> None:
    cluster = cluster_of(four_nodes({"n1": [("nginx:1.25", 500 * MiB)]}))
    # scoring only n1 still divides by all four nodes
    assert scores(IMAGES, pod("p", image="nginx:1.25"), cluster, names=["n1"]) == {"n1": 10}


def test_node_update_refreshes_images() -> None:
    from placer.engine.parsing import parse_node

    cluster = cluster_of([node("a"), node("b")])
    assert scores(IMAGES, pod("p", image="x:1"), cluster) == {"a": 0, "b": 0}
    cluster.upsert_node(parse_node(node("a", images=[("x:1", 1000 * MiB)])))
    assert scores(IMAGES, pod("p", image="x:1"), cluster) == {"a": 48, "b": 0}
    cluster.remove_node("a")
    assert scores(IMAGES, pod("p", image="x:1"), cluster) == {"b": 0}
    assert "x:1" not in cluster.image_slots


# TestImageLocalityPriority (kube v1.36 image_locality_test.go): node image sets and pods
NODE_403002000 = [(["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40 * MiB),
                  (["gcr.io/300:latest", "gcr.io/300:v1"], 300 * MiB), (["gcr.io/2000:latest"], 2000 * MiB)]
NODE_25010 = [(["gcr.io/250:latest"], 250 * MiB), (["gcr.io/10:latest", "gcr.io/10:v1"], 10 * MiB)]
NODE_60040900 = [(["gcr.io/600:latest"], 600 * MiB), (["gcr.io/40:latest"], 40 * MiB),
                 (["gcr.io/900:latest"], 900 * MiB)]
NODE_300600900 = [(["gcr.io/300:latest"], 300 * MiB), (["gcr.io/600:latest"], 600 * MiB),
                  (["gcr.io/900:latest"], 900 * MiB)]
NODE_400030 = [(["gcr.io/4000:latest"], 4000 * MiB), (["gcr.io/30:latest"], 30 * MiB)]
NODE_203040 = [(["gcr.io/20:latest"], 20 * MiB), (["gcr.io/30:latest"], 30 * MiB), (["gcr.io/40:latest"], 40 * MiB)]


def kube_pod(*images: str, init: tuple[str, ...] = (), image_volumes: tuple[str, ...] = ()) -> dict:
    return pod(
        "p",
        containers=[container(f"c{i}", image=image) for i, image in enumerate(images)],
        init_containers=[container(f"i{i}", image=image) for i, image in enumerate(init)],
        volumes=[{"name": f"v{i}", "image": {"reference": ref}} for i, ref in enumerate(image_volumes)],
    )


@pytest.mark.parametrize(
    ("spec", "nodes", "expected"),
    [
        # 40M/2 < 23M; 100 * (250M/2 - 23M) / (1000M * 2 - 23M) = 5
        (kube_pod("gcr.io/40", "gcr.io/250"), [NODE_403002000, NODE_25010], [0, 5]),
        # 100 * ((40M + 300M)/2 - 23M) / (1000M * 2 - 23M) = 7
        (kube_pod("gcr.io/40", "gcr.io/300"), [NODE_403002000, NODE_25010], [7, 0]),
        # 4000M/2 >= 2000M: max; 10M/2 < 23M
        (kube_pod("gcr.io/10", "gcr.io/4000"), [NODE_400030, NODE_25010], [100, 0]),
        # 100 * (4000M/3 - 23M) / (1000M * 2 - 23M) = 66, with a node that has no images
        (kube_pod("gcr.io/10", "gcr.io/4000"), [NODE_400030, NODE_25010, []], [66, 0, 0]),
        # 100 * (600M*2/3 + 900M*2/3 - 23M) / (3000M - 23M) = 32; + 300M/3: 36
        (kube_pod("gcr.io/300", "gcr.io/600", "gcr.io/900"), [NODE_60040900, NODE_300600900, []], [32, 36, 0]),
        # 100 * (30M + 40M/2 - 23M) / (2000M - 23M) = 1; 100 * (30M - 23M) / (2000M - 23M) = 0
        (kube_pod("gcr.io/30", "gcr.io/40"), [NODE_203040, NODE_400030], [1, 0]),
        # an image volume counts (v1.36), not in the threshold: 100 * (300M/2 - 23M) / (1000M - 23M) = 12
        (kube_pod("gcr.io/30", image_volumes=("gcr.io/300",)), [NODE_300600900, NODE_400030], [12, 0]),
        # init containers: 100 * (300M/2 - 23M) / (1000M * 2 - 23M) = 6
        (kube_pod("gcr.io/30", init=("gcr.io/300",)), [NODE_403002000, NODE_203040], [6, 0]),
    ],
    ids=["two images spread", "two images on one node", "exceed limit", "exceed limit with empty node",
         "multiple large images", "multiple small images", "image volume", "init containers"],
)
def test_kube_rows(spec: dict, nodes: list[list], expected: list[int]) -> None:
    names = [f"node{i + 1}" for i in range(len(nodes))]
    cluster = cluster_of([node(name, images=images) for name, images in zip(names, nodes, strict=True)])
    assert scores(IMAGES, spec, cluster) == dict(zip(names, expected, strict=True))


def test_image_volumes_are_normalised_and_malformed_ones_named() -> None:
    from placer.engine.parsing import parse_pod

    info = parse_pod(kube_pod("busybox:1.36", image_volumes=("quay.io/models/llama", "quay.io/data:v2")))
    assert info.images == ("busybox:1.36", "quay.io/models/llama:latest", "quay.io/data:v2")
    assert info.container_count == 1
    broken = pod("p", volumes=[{"name": "v", "image": "quay.io/data:v2"}])
    assert "spec.volumes[0].image: must be an object" in (parse_pod(broken).error or "")


def test_takes_no_args() -> None:
    with pytest.raises(ProfileError, match=r'profile "img": scores\[0\] ImageLocality: args.threshold: Extra inputs'):
        make_profile(scores=[{"name": "ImageLocality", "args": {"threshold": 1}}], name="img")
    with pytest.raises(ProfileError, match="ImageLocality is not a filter plugin"):
        make_profile(filters=[{"name": "ImageLocality"}])


def test_pods_with_the_same_images_share_a_score_until_a_node_changes() -> None:
    plugin = make_plugin("ImageLocality")
    cluster = cluster_of(four_nodes({"n1": [("nginx:1.25", 500 * MiB)]}))
    assert scores(plugin, pod("p1", image="nginx:1.25"), cluster) == {"n1": 10, "n2": 0, "n3": 0, "n4": 0}
    cluster.upsert_node(parse_node(node("n2", images=[("nginx:1.25", 500 * MiB)])))
    # 500 MB * 2/4 = 250 MB: 100 * 227 / 977 = 23 on both holders
    assert scores(plugin, pod("p2", image="nginx:1.25"), cluster) == {"n1": 23, "n2": 23, "n3": 0, "n4": 0}
    cluster.remove_node("n1")
    # 500 MB * 1/3 = 166 MB: 100 * 143 / 977 = 14
    assert scores(plugin, pod("p3", image="nginx:1.25"), cluster) == {"n2": 14, "n3": 0, "n4": 0}
