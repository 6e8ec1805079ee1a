# Durable Agent worker image: `docker build -t durable-agent-worker .`
#   docker run --rm -e TEMPORAL_ADDRESS=host.docker.internal:7233 -e OPENAI_API_KEY durable-agent-worker
# The default command is `dagent worker`; other CLI commands work too, e.g.
#   docker compose run --rm worker pending
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# Install the project from the build context with the extras the services of this image use (docs/installing.md):
# the HTTP API (`dagent api`), MCP servers as tools, OpenTelemetry export, the S3 and GCS blob stores and Bedrock
# signing. Not `server`: the embedded dev server (a 156 MB binary) has no place in a deployment, which talks to
# a Temporal cluster. .dockerignore keeps the context to the packages and metadata; the source tree is removed.
WORKDIR /src
COPY . .
RUN pip install --constraint scripts/constraints.txt ".[api,mcp,otel,s3,gcs,bedrock]" \
    && cd / && rm -rf /src

# Unprivileged runtime user; /data holds the local blob directories when no shared store (DAGENT_STORE) is set.
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin dagent \
    && mkdir -p /data/files /data/payloads && chown -R dagent:dagent /data
USER dagent
WORKDIR /home/dagent

# Defaults for a compose network; override at run time. API keys are never baked into the image:
# pass OPENAI_API_KEY / ANTHROPIC_API_KEY from the environment.
ENV TEMPORAL_ADDRESS=temporal:7233 \
    TEMPORAL_NAMESPACE=default \
    DAGENT_FILE_DIR=/data/files \
    DAGENT_PAYLOAD_DIR=/data/payloads

ENTRYPOINT ["dagent"]
CMD ["worker"]
