"""docker-compose.yml's optional observability profiles (Jaeger, Prometheus) and their configuration,
checked offline like tests/temporal/test_compose.py (compose v1 lint and `config`, no Docker engine)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from tests.temporal.test_compose import COMPOSE_PYTHON, ROOT, _resolved_config


def _yaml(path: str) -> dict[str, Any]:
    out = subprocess.run(
        [str(COMPOSE_PYTHON), "-c", "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
         str(ROOT / path)], capture_output=True, text=True, timeout=60, check=True).stdout
    return dict(json.loads(out))


def test_tracing_and_metrics_profiles_are_optional_and_wired_to_the_workers() -> None:
    services: dict[str, Any] = _resolved_config()["services"]
    jaeger, prometheus, worker = services["jaeger"], services["prometheus"], services["worker"]
    assert jaeger["profiles"] == ["tracing"] and prometheus["profiles"] == ["metrics"]
    assert "profiles" not in worker, "the worker runs without any profile"
    assert jaeger["environment"]["COLLECTOR_OTLP_ENABLED"] == "true" and "4318" in jaeger["expose"]
    env = worker["environment"]
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] is None, "tracing stays off unless the host sets an endpoint"
    port = env["DAGENT_METRICS_PORT"]
    assert port in worker["expose"]

    mount = next(str(v) for v in prometheus["volumes"] if "prometheus.yml" in str(v))
    assert mount.split(":")[0].endswith("deploy/prometheus.yml")
    config = _yaml("deploy/prometheus.yml")
    [job] = config["scrape_configs"]
    [discovery] = job["dns_sd_configs"]
    assert discovery["names"] == ["worker"] and str(discovery["port"]) == port, "scrapes every worker replica"
