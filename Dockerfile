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

# Install the project (and its pinned temporalio, with the S3 and GCS blob store clients) from the build context; .dockerignore keeps the
# context to the packages and metadata. The source tree is removed afterwards.
WORKDIR /src
COPY . .
RUN pip install ".[s3,gcs]" \
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
