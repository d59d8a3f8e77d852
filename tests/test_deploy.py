"""The cluster deployment: `deploy/k8s` (kustomize), the compose `cluster` profile, `deploy/lb`.

kubectl and kustomize are not needed: the kustomizations are rendered here in plain Python (they
keep to `resources`, `labels`, `namespace`, `images`, `replicas` and JSON 6902 `patches`; any
other key fails the render, so a new feature cannot be silently skipped), and when kubectl is
installed its own rendering must agree. Every manifest is validated offline against the
Kubernetes OpenAPI schemas that kubernetes-validate ships (strict: unknown fields fail), the
ServiceMonitor and PrometheusRule CRDs against schemas of the fields the Prometheus Operator
reads (the rules themselves: tests/test_alerts.py), and then the manifests are checked against
each other and against factrail itself (its settings, its Dockerfile, its routes).
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import kubernetes_validate
import pytest
import yaml
from pydantic import AliasChoices

from factrail.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
BASE = K8S / "base"
DEV = K8S / "overlays" / "dev"
SECRET_EXAMPLE = K8S / "secret.example.yaml"
COMPOSE = DEPLOY / "compose.yaml"
DOCKERFILE = DEPLOY / "Dockerfile"

K8S_VERSION = "1.30.0"
"""The oldest Kubernetes the manifests are written for; kubernetes-validate bundles its schemas
(and those of every later release it knows, which a newer cluster accepts as well)."""
OTHER_FACTRAIL_ENV = {"FACTRAIL_CONFIG"}
"""Read from the environment but not a field of `Settings` (the TOML file's path)."""

KUSTOMIZE_KEYS = {"apiVersion", "kind", "resources", "labels", "namespace", "images", "replicas"}
KUSTOMIZE_KEYS |= {"patches"}
WORKLOADS = {"Deployment", "StatefulSet"}
CLUSTER_SCOPED = {"Namespace", "PersistentVolume", "StorageClass", "ClusterRole"}
EXPECTED_KINDS = {
    "ConfigMap",
    "Deployment",
    "Service",
    "HorizontalPodAutoscaler",
    "PodDisruptionBudget",
    "ServiceMonitor",
    "NetworkPolicy",
    "PersistentVolumeClaim",
    "StatefulSet",
    "PrometheusRule",
}
REDIS_IMAGES = re.compile(r"^(redis:7\.\d+(\.\d+)?-alpine|valkey/valkey:8(\.\d+)*(-alpine)?)$")
KEY_SHAPED = re.compile(
    r"sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|\b[0-9a-fA-F]{32,}\b|[A-Za-z0-9+/]{40,}={0,2}"
)

# The fields of a ServiceMonitor and a PrometheusRule the Prometheus Operator needs (its CRDs are
# not among the Kubernetes schemas); unknown fields fail, as the CRDs' structural schemas would
# prune them.
DURATION = (
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
)
LABEL_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
METADATA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
        "namespace": {"type": "string"},
        "labels": LABEL_MAP,
        "annotations": LABEL_MAP,
    },
}
SERVICE_MONITOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": METADATA_SCHEMA,
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "minProperties": 1,
                    "properties": {"matchLabels": LABEL_MAP, "matchExpressions": {"type": "array"}},
                },
                "namespaceSelector": {"type": "object"},
                "jobLabel": {"type": "string"},
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["port"],
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string", "minLength": 1},
                            "path": {"type": "string", "pattern": "^/"},
                            "scheme": {"enum": ["http", "https"]},
                            "interval": {"type": "string", "pattern": DURATION},
                            "scrapeTimeout": {"type": "string", "pattern": DURATION},
                            "honorLabels": {"type": "boolean"},
                        },
                    },
                },
            },
        },
    },
}


RULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["expr"],
    "additionalProperties": False,
    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
    "properties": {
        "alert": {"type": "string", "minLength": 1},
        "record": {"type": "string", "minLength": 1},
        "expr": {"type": "string", "minLength": 1},
        "for": {"type": "string", "pattern": DURATION},
        "keep_firing_for": {"type": "string", "pattern": DURATION},
        "labels": LABEL_MAP,
        "annotations": LABEL_MAP,
    },
}
PROMETHEUS_RULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": METADATA_SCHEMA,
        "spec": {
            "type": "object",
            "required": ["groups"],
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["name", "rules"],
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": {"type": "string", "pattern": DURATION},
                            "limit": {"type": "integer", "minimum": 0},
                            "rules": {"type": "array", "minItems": 1, "items": RULE_SCHEMA},
                        },
                    },
                },
            },
        },
    },
}
OPERATOR_SCHEMAS = {
    "ServiceMonitor": SERVICE_MONITOR_SCHEMA,
    "PrometheusRule": PROMETHEUS_RULE_SCHEMA,
}


# -- rendering ---------------------------------------------------------------------------------


def load_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def render(root: Path) -> list[dict[str, Any]]:
    """What `kustomize build root` prints, for the subset of kustomize these files use."""
    spec = yaml.safe_load((root / "kustomization.yaml").read_text(encoding="utf-8"))
    unknown = set(spec) - KUSTOMIZE_KEYS
    assert not unknown, f"{root}: the test's renderer does not apply {sorted(unknown)}"
    docs: list[dict[str, Any]] = []
    for entry in spec.get("resources", []):
        path = (root / entry).resolve()
        docs += render(path) if path.is_dir() else load_docs(path)
    for patch in spec.get("patches", []):
        assert set(patch) == {"target", "patch"}, patch
        assert set(patch["target"]) == {"kind", "name"}, patch["target"]
        targets = [
            d for d in docs if _kind_name(d) == (patch["target"]["kind"], patch["target"]["name"])
        ]
        assert len(targets) == 1, f"patch target {patch['target']} matches {len(targets)}"
        ops = yaml.safe_load(patch["patch"])
        assert isinstance(ops, list), "only JSON 6902 patches are rendered here"
        _json_patch(targets[0], ops)
    if "namespace" in spec:
        for doc in docs:
            if doc["kind"] not in CLUSTER_SCOPED:
                doc["metadata"]["namespace"] = spec["namespace"]
    for label in spec.get("labels", []):
        assert set(label) <= {"pairs", "includeSelectors"}, label
        assert not label.get("includeSelectors"), "selectors are written out in each manifest"
        for doc in docs:
            doc["metadata"].setdefault("labels", {}).update(label["pairs"])
    for replicas in spec.get("replicas", []):
        found = [
            d for d in docs if d["kind"] in WORKLOADS and d["metadata"]["name"] == replicas["name"]
        ]
        assert found, f"replicas: no workload {replicas['name']}"
        for doc in found:
            doc["spec"]["replicas"] = replicas["count"]
    for image in spec.get("images", []):
        assert set(image) <= {"name", "newName", "newTag"}, image
        hits = 0
        for doc in docs:
            for container in containers(doc):
                name, tag = _split_image(container["image"])
                if name == image["name"]:
                    hits += 1
                    new_name = image.get("newName", name)
                    container["image"] = f"{new_name}:{image.get('newTag', tag)}"
        assert hits, f"images: no container runs {image['name']}"
    return docs


def _json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        node: Any = doc
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        last = parts[-1]
        if isinstance(node, list):
            index = len(node) if last == "-" else int(last)
            if op["op"] == "add":
                node.insert(index, op["value"])
            elif op["op"] == "replace":
                node[index] = op["value"]
            elif op["op"] == "remove":
                del node[index]
            else:
                raise AssertionError(f"unsupported op {op['op']}")
        elif op["op"] in ("add", "replace"):
            assert op["op"] == "add" or last in node, f"replace of a missing {op['path']}"
            node[last] = op["value"]
        elif op["op"] == "remove":
            del node[last]
        else:
            raise AssertionError(f"unsupported op {op['op']}")


def _split_image(image: str) -> tuple[str, str]:
    name, sep, tag = image.rpartition(":")
    return (name, tag) if sep and "/" not in tag else (image, "latest")


def _kind_name(doc: dict[str, Any]) -> tuple[str, str]:
    return doc["kind"], doc["metadata"]["name"]


# -- reading the rendered manifests ---------------------------------------------------------------


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def every(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


def pod_labels(doc: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = doc["spec"]["template"]["metadata"]["labels"]
    return labels


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    if doc["kind"] not in WORKLOADS:
        return []
    spec = pod_spec(doc)
    return [*spec.get("initContainers", []), *spec["containers"]]


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector (`matchLabels`) or a Service's plain map, against a set of labels."""
    assert "matchExpressions" not in selector, "only matchLabels are checked here"
    wanted = selector.get("matchLabels", selector)
    return bool(wanted) and all(labels.get(k) == v for k, v in wanted.items())


def container_port(container: dict[str, Any], port: int | str) -> int:
    """A probe's or a Service's target port, by name or number, as the container declares it."""
    for declared in container.get("ports", []):
        if port in (declared.get("name"), declared["containerPort"]):
            return int(declared["containerPort"])
    raise AssertionError(f"{container['name']} declares no port {port!r}")


def gateway(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return one(docs, "Deployment", "factrail")


def gateway_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = [c for c in containers(gateway(docs)) if c["name"] == "factrail"]
    return container


def gateway_env(docs: list[dict[str, Any]]) -> dict[str, str]:
    """The gateway's settings as configured: its ConfigMap(s), then its literal env."""
    container = gateway_container(docs)
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(one(docs, "ConfigMap", source["configMapRef"]["name"])["data"])
    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    return env


def quantity(value: str | int | float) -> float:
    """A Kubernetes quantity (or a Redis memory size) as a number: bytes, or CPU cores."""
    text = str(value).strip()
    units = {
        "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
        "kb": 2**10, "mb": 2**20, "gb": 2**30,
        "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3,
    }  # fmt: skip
    for unit, factor in units.items():
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    return float(text)


def settings_env_names() -> set[str]:
    """Every environment variable `Settings` reads: `FACTRAIL_<FIELD>` and declared aliases."""
    names = set(OTHER_FACTRAIL_ENV)
    for field_name, field in Settings.model_fields.items():
        names.add(f"FACTRAIL_{field_name.upper()}")
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names |= {choice for choice in alias.choices if isinstance(choice, str)}
        elif isinstance(alias, str):
            names.add(alias)
    return names


def unknown_settings(names: set[str]) -> set[str]:
    return names - settings_env_names()


def shutdown_timeout_s(env: dict[str, Any]) -> float:
    default = Settings.model_fields["shutdown_timeout_s"].default
    return float(env.get("FACTRAIL_SHUTDOWN_TIMEOUT_S", default))


def dockerfile_value(pattern: str) -> str:
    match = re.search(pattern, DOCKERFILE.read_text(encoding="utf-8"))
    assert match, f"deploy/Dockerfile: no match for {pattern}"
    return match.group(1)


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return render(K8S)


@pytest.fixture(scope="module")
def dev() -> list[dict[str, Any]]:
    return render(DEV)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    return data


# -- Kubernetes: what is rendered, and the schemas ------------------------------------------------


def test_the_kustomization_renders_every_manifest_but_the_secret_example(
    base: list[dict[str, Any]],
) -> None:
    listed = yaml.safe_load((BASE / "kustomization.yaml").read_text(encoding="utf-8"))["resources"]
    on_disk = sorted(p.name for p in BASE.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == on_disk, "every manifest in deploy/k8s/base is listed, once"
    entry = yaml.safe_load((K8S / "kustomization.yaml").read_text(encoding="utf-8"))
    assert entry["resources"] == ["base"]
    for kustomization in K8S.rglob("kustomization.yaml"):
        assert "secret.example" not in str(yaml.safe_load(kustomization.read_text()))
    assert not every(base, "Secret"), "Secrets are created by hand, never applied from git"
    assert {d["kind"] for d in base} == EXPECTED_KINDS
    names = [_kind_name(d) for d in base]
    assert len(names) == len(set(names))
    assert not [n for d, n in zip(base, names, strict=True) if "namespace" in d["metadata"]], (
        "the base is namespace-agnostic"
    )
    assert all(d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "factrail" for d in base)


@pytest.mark.parametrize("which", ["base", "dev", "secret-example"])
def test_every_manifest_validates_against_the_kubernetes_schemas(
    which: str, base: list[dict[str, Any]], dev: list[dict[str, Any]]
) -> None:
    docs = {"base": base, "dev": dev, "secret-example": load_docs(SECRET_EXAMPLE)}[which]
    errors = []
    for doc in docs:
        try:
            validate(doc)
        except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as err:
            errors.append(f"{doc['kind']}/{doc['metadata']['name']}: {err}")
    assert not errors, "\n".join(errors)


def validate(doc: dict[str, Any]) -> None:
    if doc["apiVersion"].startswith("monitoring.coreos.com/"):
        jsonschema.validate(doc, OPERATOR_SCHEMAS[doc["kind"]])
    else:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_validators_reject_what_they_should(base: list[dict[str, Any]]) -> None:
    """The schemas are strict (a misspelt field fails) and bundled (no network is used)."""
    broken = copy.deepcopy(gateway(base))
    broken["spec"]["template"]["spec"]["containers"][0]["readinessprobe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(broken)
    broken = copy.deepcopy(one(base, "HorizontalPodAutoscaler"))
    broken["spec"]["minReplicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(broken)
    monitor = copy.deepcopy(one(base, "ServiceMonitor"))
    monitor["spec"]["endpoints"][0]["interval"] = "15 seconds"
    with pytest.raises(jsonschema.ValidationError):
        validate(monitor)
    del monitor["spec"]["endpoints"]
    with pytest.raises(jsonschema.ValidationError):
        validate(monitor)
    rules = copy.deepcopy(one(base, "PrometheusRule"))
    rules["spec"]["groups"][0]["rules"][0]["for"] = "ten minutes"
    with pytest.raises(jsonschema.ValidationError):
        validate(rules)
    rules["spec"]["groups"][0]["rules"][0] = {"alert": "A", "expr": "up == 0", "severity": "x"}
    with pytest.raises(jsonschema.ValidationError):
        validate(rules)


def test_kubectl_kustomize_renders_the_same(
    base: list[dict[str, Any]], dev: list[dict[str, Any]]
) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed (the Python rendering stands alone)")
    for root, ours in ((K8S, base), (DEV, dev)):
        done = subprocess.run(
            [kubectl, "kustomize", str(root)], capture_output=True, text=True, timeout=120
        )
        if done.returncode != 0 and "unknown command" in done.stderr:
            pytest.skip("this kubectl has no kustomize")
        assert done.returncode == 0, done.stderr
        theirs = [d for d in yaml.safe_load_all(done.stdout) if d is not None]
        assert sorted(theirs, key=_kind_name) == sorted(ours, key=_kind_name)


# -- Kubernetes: the manifests against each other ----------------------------------------------


def test_each_service_selects_exactly_its_workload(base: list[dict[str, Any]]) -> None:
    workloads = [d for d in base if d["kind"] in WORKLOADS]
    for service in every(base, "Service"):
        matched = [w for w in workloads if selects(service["spec"]["selector"], pod_labels(w))]
        assert len(matched) == 1, f"Service {service['metadata']['name']} selects {len(matched)}"
        (container,) = containers(matched[0])
        for port in service["spec"]["ports"]:
            container_port(container, port["targetPort"])
    redis = one(base, "StatefulSet")
    governing = one(base, "Service", redis["spec"]["serviceName"])
    assert governing["spec"].get("clusterIP") == "None", "a StatefulSet's Service is headless"
    assert selects(governing["spec"]["selector"], pod_labels(redis))
    for doc in [*every(base, "Deployment"), *every(base, "StatefulSet")]:
        assert selects(doc["spec"]["selector"], pod_labels(doc))


def test_probes_are_readyz_and_healthz_on_the_served_port(base: list[dict[str, Any]]) -> None:
    container = gateway_container(base)
    served = int(container["command"][container["command"].index("--port") + 1])
    assert container_port(container, "http") == served
    paths = {}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get.get("scheme", "HTTP") == "HTTP"
        assert container_port(container, get["port"]) == served, probe
        paths[probe] = get["path"]
    assert paths["readinessProbe"] == "/readyz"
    # Liveness must not depend on Redis: a store outage takes pods out of the Service, it must
    # not restart them all.
    assert paths["livenessProbe"] == "/healthz"
    assert paths["startupProbe"] == "/healthz"
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 30


def test_hpa_and_pdb_target_the_deployment(base: list[dict[str, Any]]) -> None:
    deployment = gateway(base)
    hpa = one(base, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": deployment["apiVersion"],
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }
    assert 2 <= hpa["spec"]["minReplicas"] <= deployment["spec"]["replicas"]
    assert deployment["spec"]["replicas"] <= hpa["spec"]["maxReplicas"]
    assert any(
        m["type"] == "Resource" and m["resource"]["name"] == "cpu" for m in hpa["spec"]["metrics"]
    )
    pdb = one(base, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    # Below the HPA's floor, so a node drain can always evict one pod.
    assert pdb["spec"]["minAvailable"] < hpa["spec"]["minReplicas"]
    matched = [
        w
        for w in base
        if w["kind"] in WORKLOADS and selects(pdb["spec"]["selector"], pod_labels(w))
    ]
    assert matched == [deployment]
    assert deployment["spec"]["replicas"] == 2


def test_the_service_monitor_scrapes_the_gateway_service(base: list[dict[str, Any]]) -> None:
    monitor = one(base, "ServiceMonitor")
    services = [
        s
        for s in every(base, "Service")
        if selects(monitor["spec"]["selector"], s["metadata"]["labels"])
    ]
    assert [s["metadata"]["name"] for s in services] == ["factrail"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    ports = {p["name"]: p for p in services[0]["spec"]["ports"]}
    assert endpoint["port"] in ports, "the endpoint names a port of the Service"
    served = container_port(gateway_container(base), ports[endpoint["port"]]["targetPort"])
    assert served == container_port(gateway_container(base), "http")


def test_the_gateway_env_names_are_factrail_settings(base: list[dict[str, Any]]) -> None:
    container = gateway_container(base)
    names = set(gateway_env(base)) | {e["name"] for e in container.get("env", [])}
    names |= set(load_docs(SECRET_EXAMPLE)[0]["stringData"])
    assert all(n.startswith("FACTRAIL_") for n in names), sorted(names)
    assert not unknown_settings(names)
    assert {"FACTRAIL_ADMIN_KEY", "FACTRAIL_STATE_URL", "FACTRAIL_OUTPUTS_DIR"} <= names


def test_termination_grace_covers_the_prestop_sleep_and_the_shutdown_timeout(
    base: list[dict[str, Any]],
) -> None:
    container = gateway_container(base)
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep"
    pre_stop = float(command[1])
    assert pre_stop >= 3, "endpoints need a few seconds to drop the pod"
    grace = pod_spec(gateway(base))["terminationGracePeriodSeconds"]
    assert grace > pre_stop + shutdown_timeout_s(gateway_env(base))


def test_pods_are_hardened_and_sized(base: list[dict[str, Any]]) -> None:
    for workload in [d for d in base if d["kind"] in WORKLOADS]:
        spec = pod_spec(workload)
        name = workload["metadata"]["name"]
        assert spec["automountServiceAccountToken"] is False, name
        pod_security = spec["securityContext"]
        assert pod_security["runAsNonRoot"] is True, name
        assert pod_security["runAsUser"] > 0, name
        assert pod_security["seccompProfile"]["type"] == "RuntimeDefault", name
        volumes = {v["name"] for v in spec.get("volumes", [])}
        volumes |= {t["metadata"]["name"] for t in workload["spec"].get("volumeClaimTemplates", [])}
        for container in containers(workload):
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["readOnlyRootFilesystem"] is True, name
            assert security["capabilities"]["drop"] == ["ALL"], name
            resources = container["resources"]
            for what in ("cpu", "memory"):
                request = quantity(resources["requests"][what])
                assert 0 < request <= quantity(resources["limits"][what]), (name, what)
            assert {m["name"] for m in container.get("volumeMounts", [])} <= volumes, name
    deployment = gateway(base)
    spec = pod_spec(deployment)
    assert spec["securityContext"]["runAsUser"] == int(dockerfile_value(r"--uid (\d+)"))
    mounts = {m["mountPath"]: m["name"] for m in gateway_container(base)["volumeMounts"]}
    empty_dirs = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
    assert mounts["/tmp"] in empty_dirs
    # Where the image keeps its data and cache (XDG_* in the Dockerfile) must be writable.
    for var in ("XDG_DATA_HOME", "XDG_CACHE_HOME"):
        path = dockerfile_value(var + r"=(\S+)")
        assert any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts), var
    spread = spec["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in spread} >= {"kubernetes.io/hostname"}
    assert all(selects(c["labelSelector"], pod_labels(deployment)) for c in spread)
    memory_limit = quantity(gateway_container(base)["resources"]["limits"]["memory"])
    assert memory_limit >= 2**30, "a compacting gateway holds several sessions' analyses"


def test_the_outputs_volume_is_shared_by_every_replica(base: list[dict[str, Any]]) -> None:
    env = gateway_env(base)
    spec = pod_spec(gateway(base))
    (mount,) = [
        m
        for m in gateway_container(base)["volumeMounts"]
        if m["mountPath"] == env["FACTRAIL_OUTPUTS_DIR"]
    ]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    claim = one(base, "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    size = quantity(claim["spec"]["resources"]["requests"]["storage"])
    # Each replica counts the folder itself between sweeps: leave room for the others' writes.
    assert int(env["FACTRAIL_OUTPUTS_MAX_BYTES"]) <= 0.8 * size
    # The capability key must be one for all replicas: from the Secret, never made per pod.
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in gateway_container(base)["env"]}
    assert not refs["FACTRAIL_OUTPUTS_SECRET"].get("optional", False)


def test_the_state_store_is_the_redis_statefulset(base: list[dict[str, Any]]) -> None:
    url = urlsplit(gateway_env(base)["FACTRAIL_STATE_URL"])
    assert (url.scheme, url.hostname, url.port, url.path) == ("redis", "factrail-redis", 6379, "/0")
    service = one(base, "Service", url.hostname)
    redis = one(base, "StatefulSet")
    assert selects(service["spec"]["selector"], pod_labels(redis))
    (container,) = containers(redis)
    (port,) = [p for p in service["spec"]["ports"] if p["port"] == url.port]
    assert container_port(container, port["targetPort"]) == 6379
    assert REDIS_IMAGES.match(container["image"]), container["image"]
    command = " ".join(container["command"])
    assert "--appendonly yes" in command
    assert "--maxmemory-policy noeviction" in command, "taint must never be evicted"
    data_dir = re.search(r"--dir (\S+)", command)
    assert data_dir
    maxmemory = re.search(r"--maxmemory (\S+)", command)
    assert maxmemory
    assert quantity(maxmemory.group(1)) < quantity(container["resources"]["limits"]["memory"])
    (template,) = redis["spec"]["volumeClaimTemplates"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts[data_dir.group(1)] == template["metadata"]["name"]
    assert redis["spec"]["replicas"] == 1


def test_network_policies_fence_the_gateway_and_redis(base: list[dict[str, Any]]) -> None:
    deployment, redis = gateway(base), one(base, "StatefulSet")
    served = container_port(gateway_container(base), "http")
    policies = every(base, "NetworkPolicy")
    (gw,) = [p for p in policies if selects(p["spec"]["podSelector"], pod_labels(deployment))]
    (store,) = [p for p in policies if selects(p["spec"]["podSelector"], pod_labels(redis))]
    assert sorted(gw["spec"]["policyTypes"]) == ["Egress", "Ingress"]
    for rule in gw["spec"]["ingress"]:
        assert rule["from"], "no ingress rule admits everyone"
        assert rule["ports"] == [{"protocol": "TCP", "port": served}]
        assert not any("ipBlock" in peer for peer in rule["from"])
    assert {"podSelector": {}} in gw["spec"]["ingress"][0]["from"], "the namespace's own pods"
    egress = gw["spec"]["egress"]
    assert all(rule.get("ports") for rule in egress), "no egress rule opens every port"
    open_ports = {(p["protocol"], p["port"]) for rule in egress for p in rule["ports"]}
    assert open_ports == {("TCP", 6379), ("UDP", 53), ("TCP", 53), ("TCP", 443)}
    (to_redis,) = [r for r in egress if r["ports"] == [{"protocol": "TCP", "port": 6379}]]
    assert [selects(p["podSelector"], pod_labels(redis)) for p in to_redis["to"]] == [True]
    assert sorted(store["spec"]["policyTypes"]) == ["Egress", "Ingress"]
    assert store["spec"]["egress"] == []
    (admitted,) = store["spec"]["ingress"]
    assert admitted["ports"] == [{"protocol": "TCP", "port": 6379}]
    assert [selects(p["podSelector"], pod_labels(deployment)) for p in admitted["from"]] == [True]
    assert not selects(admitted["from"][0]["podSelector"], pod_labels(redis))


def test_the_secret_example_holds_no_secret(base: list[dict[str, Any]]) -> None:
    (example,) = load_docs(SECRET_EXAMPLE)
    assert "data" not in example
    assert set(example["stringData"].values()) == {""}, "placeholders only: empty values"
    defined = {(example["metadata"]["name"], key) for key in example["stringData"]}
    text = SECRET_EXAMPLE.read_text(encoding="utf-8")
    for workload in [d for d in base if d["kind"] in WORKLOADS]:
        for container in containers(workload):
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref and not ref.get("optional"):
                    assert (ref["name"], ref["key"]) in defined, env["name"]
                elif ref:
                    assert ref["name"] in text, f"optional Secret {ref['name']} is documented"
            for source in container.get("envFrom", []):
                if "secretRef" in source:
                    assert source["secretRef"].get("optional") is True
                    assert source["secretRef"]["name"] in text
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in gateway_container(base)["env"]}
    assert not refs["FACTRAIL_ADMIN_KEY"].get("optional", False), "serve refuses to bind without it"
    files = [*K8S.rglob("*.yaml"), COMPOSE, *(DEPLOY / "lb").iterdir()]
    leaks = {
        str(f.relative_to(ROOT)) for f in files if KEY_SHAPED.search(f.read_text(encoding="utf-8"))
    }
    assert not leaks, f"key-shaped literals in {sorted(leaks)}"


def test_the_dev_overlay(dev: list[dict[str, Any]]) -> None:
    assert {d["metadata"].get("namespace") for d in dev} == {"factrail-dev"}
    assert gateway(dev)["spec"]["replicas"] == 1
    assert gateway_container(dev)["image"] == "factrail:dev"
    hpa = one(dev, "HorizontalPodAutoscaler")
    assert hpa["spec"]["minReplicas"] == 1 <= hpa["spec"]["maxReplicas"]
    assert one(dev, "PodDisruptionBudget")["spec"]["minAvailable"] == 0


# -- compose: the `cluster` profile ---------------------------------------------------------------


def cluster_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in compose["services"].items() if "cluster" in s.get("profiles", [])}


def replicas(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in cluster_services(compose).items() if "build" in s}


def test_compose_keeps_the_single_instance_default(compose: dict[str, Any]) -> None:
    default = {n for n, s in compose["services"].items() if not s.get("profiles")}
    assert default == {"factrail", "prometheus", "grafana"}
    cluster = cluster_services(compose)
    assert set(cluster) == {"factrail-1", "factrail-2", "lb", "redis"}
    assert all(s["profiles"] == ["cluster"] for s in cluster.values())
    assert "8080" in str(compose["services"]["factrail"]["ports"])


def test_compose_replicas_share_redis_and_the_outputs(compose: dict[str, Any]) -> None:
    services = compose["services"]
    reps = replicas(compose)
    assert len(reps) == 2
    volumes = set(compose["volumes"])
    mounted = []
    for name, rep in reps.items():
        env = rep["environment"]
        assert env["FACTRAIL_STATE_URL"] == "redis://redis:6379/0", name
        assert not unknown_settings(set(env)), name
        assert set(env) >= set(services["factrail"]["environment"]), "the default's settings too"
        by_path = {v.split(":")[1]: v.split(":")[0] for v in rep["volumes"]}
        assert by_path[env["FACTRAIL_OUTPUTS_DIR"]] in volumes
        assert by_path["/var/lib/factrail"] in volumes, "one outputs key for both replicas"
        mounted.append(by_path)
        assert "/readyz" in " ".join(rep["healthcheck"]["test"])
        assert rep["depends_on"]["redis"]["condition"] == "service_healthy"
        grace = quantity(rep["stop_grace_period"].removesuffix("s"))
        assert grace > shutdown_timeout_s(env), "compose's SIGKILL comes after the shutdown timeout"
    assert mounted[0] == mounted[1], "the replicas share the same volumes"
    redis = services["redis"]
    assert REDIS_IMAGES.match(redis["image"])
    assert "--appendonly yes" in " ".join(redis["command"])
    assert "redis-cli" in redis["healthcheck"]["test"]
    assert not redis.get("ports"), "Redis is not published"


def test_compose_load_balancer(compose: dict[str, Any]) -> None:
    services = compose["services"]
    lb = services["lb"]
    assert lb["ports"] == ["127.0.0.1:${FACTRAIL_LB_PORT:-8080}:8080"], "loopback only"
    reps = replicas(compose)
    for name in reps:
        assert lb["depends_on"][name]["condition"] == "service_healthy"
        assert reps[name]["healthcheck"]["test"]
    (config_mount,) = [v for v in lb["volumes"] if v.endswith(":/etc/nginx/nginx.conf:ro")]
    config = (COMPOSE.parent / config_mount.split(":")[0]).resolve()
    assert config.is_file()
    text = config.read_text(encoding="utf-8")
    upstream = re.search(r"upstream \w+ \{(.*?)\}", text, re.S)
    assert upstream
    servers = re.findall(r"^\s*server ([\w.-]+):(\d+)", upstream.group(1), re.M)
    assert sorted(servers) == sorted((name, "8080") for name in reps)
    assert not re.search(r"^\s*(ip_hash|hash|least_conn|random)\b", upstream.group(1), re.M), (
        "round-robin"
    )
    assert re.search(r"^\s*listen 8080;", text, re.M)
    for directive in ("proxy_buffering off;", "proxy_request_buffering off;"):
        assert directive in text
    assert "proxy_http_version 1.1;" in text
    read_timeout = re.search(r"proxy_read_timeout (\d+)s;", text)
    assert read_timeout
    assert int(read_timeout.group(1)) > Settings.model_fields["read_timeout_s"].default
    body = re.search(r"client_max_body_size (\d+)m;", text)
    assert body
    assert int(body.group(1)) * 2**20 > Settings.model_fields["max_body_bytes"].default
