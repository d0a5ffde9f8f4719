# syntax=docker/dockerfile:1
#
# The hero-gateway image: one image for the gateway, the actors, the archiver
# and the Spark pipeline driver (the compose stack runs each with a different
# command). Build it from the repository root:
#
#   docker build -t hero-gateway:0.1.0 .
#   docker run --rm hero-gateway:0.1.0 --help
#
# Two stages: `build` makes the project's wheel and installs it with its
# dependencies into /opt/venv; the final stage copies that venv onto a clean
# slim Python with a headless Java runtime (PySpark) and runs as a non-root
# user. No compiler, pip cache, apt lists or sources end up in the image.

# Debian bookworm: its openjdk-17 matches the Java of the apache/spark image
# the compose stack runs (…-java17-…), so driver and executors share a JVM major.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build

# PySpark must be the version of the Spark cluster it talks to (the compose
# stack's apache/spark image uses the same SPARK_VERSION).
ARG SPARK_VERSION=4.3.0

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore

WORKDIR /src
COPY pyproject.toml README.md ./
COPY gateway ./gateway

# A venv without pip (nothing to install packages with at run time), filled
# from outside with the build stage's pip.
RUN python -m pip wheel --no-deps --wheel-dir /wheels . \
 && python -m venv --without-pip /opt/venv \
 && set -- /wheels/hero_gateway-*.whl \
 && python -m pip --python /opt/venv/bin/python install "$1[pipeline]" "pyspark==${SPARK_VERSION}"


FROM ${PYTHON_IMAGE}

ARG SPARK_VERSION=4.3.0
# 185 is the uid of the `spark` user in the apache/spark image: files that the
# pipeline driver (this image) and the Spark executors (that image) write to
# the shared /data volume then have one owner.
ARG APP_UID=185

LABEL org.opencontainers.image.title="hero-gateway" \
      org.opencontainers.image.description="JSON-RPC 2.0 job gateway speaking the Hero job protocol on Redis" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0" \
      io.hero-gateway.spark-version="${SPARK_VERSION}"

# Debian's headless JRE for PySpark, and bubblewrap and libseccomp, the
# sandbox of python jobs and its seccomp filter; package versions follow bookworm's security updates rather than a pin.
# (man1 must exist on slim images for the JRE's post-install alternatives.)
# hadolint ignore=DL3008
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless bubblewrap libseccomp2 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid "${APP_UID}" hero \
 && useradd --system --uid "${APP_UID}" --gid hero --create-home --home-dir /home/hero \
      --shell /usr/sbin/nologin hero \
 && mkdir -p /data/events /data/pipeline-out /var/lib/hero-gateway/logs \
 && chown -R hero:hero /data /var/lib/hero-gateway

COPY --from=build /opt/venv /opt/venv
COPY --chmod=0755 deploy/docker/every.sh /usr/local/bin/hero-every
COPY --chmod=0755 deploy/docker/healthcheck.py /usr/local/bin/hero-healthcheck

ENV PATH=/opt/venv/bin:${PATH} \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HERO_LOG_DIR=/var/lib/hero-gateway/logs

USER ${APP_UID}:${APP_UID}
WORKDIR /data
EXPOSE 8080

# `docker run IMAGE actor --script-type python`, `docker run IMAGE keys list`, …
# The default listens on every interface of the container, which `serve`
# refuses until an API key exists or HERO_INSECURE=true is set (see README).
# Health checks are per service in docker-compose.yml (hero-healthcheck).
ENTRYPOINT ["hero-gateway"]
CMD ["serve", "--host", "0.0.0.0"]
