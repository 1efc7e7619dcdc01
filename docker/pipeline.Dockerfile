# The Spark page-view pipeline (python -m logway.spark.pipeline) in a container: PySpark on a Java 17 runtime.
# Build from docker/ after `python3 -m pip wheel '..[spark]' --wheel-dir wheelhouse` (see compose.yaml).
# One stage: the wheelhouse (PySpark's wheel alone is about 400 MB) is bind-mounted for the install, never copied
# into a layer; pip installs without byte-compiling (--no-compile) and is removed afterwards.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}
# Java from Debian unless the base already has it (the tests' base image does).
# hadolint ignore=DL3008
RUN if ! command -v java >/dev/null; then \
        mkdir -p /usr/share/man/man1 \
        && apt-get update \
        && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && groupadd --system --gid 1000 logway \
    && useradd --system --uid 1000 --gid logway --home-dir /var/lib/logway-pipeline --no-create-home logway \
    && mkdir -p /var/lib/logway-pipeline \
    && chown logway:logway /var/lib/logway-pipeline
RUN --mount=type=bind,source=wheelhouse,target=/wheels \
    python3 -m venv /opt/logway \
    && /opt/logway/bin/pip install --no-cache-dir --no-compile --no-index --find-links /wheels "logway[spark]" \
    && /opt/logway/bin/pip uninstall --yes --quiet pip
ENV PATH=/opt/logway/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1 \
    PYSPARK_PYTHON=/opt/logway/bin/python \
    HOME=/var/lib/logway-pipeline
USER 1000:1000
WORKDIR /var/lib/logway-pipeline
VOLUME ["/var/lib/logway-pipeline"]
ENTRYPOINT ["python", "-m", "logway.spark.pipeline"]
CMD ["--bootstrap", "broker:29092", "--work-dir", "/var/lib/logway-pipeline"]
