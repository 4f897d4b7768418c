# syntax=docker/dockerfile:1
# The sleeve image: the moss-files toolkit installed as install.sh installs it, running
# `needlecast sidecar` under a tiny init (docker/init.py) as an unprivileged user.
# Every setting comes from the environment (see docs/containers.md); the workspace is mounted
# at /workspace. Build: docker build -t moss-files-sleeve .
# The base is Debian trixie's: the sleeve terminal's ttyd is packaged by Debian from trixie on.
# PYTHON_IMAGE names another base with Python 3.11 or newer and Debian's apt (the tests build on
# a root filesystem made by mmdebstrap, where no image registry is reachable).
ARG PYTHON_IMAGE=python:3.12-slim-trixie

FROM ${PYTHON_IMAGE} AS build
# git: install.sh checks for it (and the merge driver needs it at run time too).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md LICENSE install.sh ./
COPY moss_files ./moss_files
COPY cstack ./cstack
COPY needlecast ./needlecast
COPY templates ./templates
# install.sh needs a project to set up; the throwaway one shows the install works end to end.
RUN mkdir /tmp/probe \
    && MOSS_HOME=/opt/moss-files MOSS_BIN_DIR=/opt/moss-files/bin MOSS_PYTHON=python3 ./install.sh /tmp/probe \
    && rm -rf /tmp/probe /root/.cache \
    && find /opt/moss-files -name '__pycache__' -prune -exec rm -rf {} +

FROM ${PYTHON_IMAGE}
# git for --git-sync and the merge driver; tmux and ttyd for the sleeve terminal (off unless
# NEEDLECAST_TERMINAL=true: the agent runs in tmux, served by ttyd on a port of its own).
# Debian packages ttyd from forky on; its dependencies are all in trixie, so forky is added
# below trixie's priority (only a package trixie lacks comes from it) and removed again.
# APT_CHECK_VALID_UNTIL=no accepts a forky Release file past its (one week) Valid-Until date,
# as a snapshot of the archive serves it; the default keeps apt's check.
ARG APT_CHECK_VALID_UNTIL=yes
# hadolint ignore=DL3008
RUN printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: forky' 'Components: main' \
        'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' "Check-Valid-Until: ${APT_CHECK_VALID_UNTIL}" \
        > /etc/apt/sources.list.d/ttyd.sources \
    && printf '%s\n' 'Package: *' 'Pin: release n=forky' 'Pin-Priority: 100' > /etc/apt/preferences.d/ttyd \
    && apt-get update \
    && apt-get install -y --no-install-recommends git tmux ttyd \
    && rm -rf /var/lib/apt/lists/* /etc/apt/sources.list.d/ttyd.sources /etc/apt/preferences.d/ttyd \
    && useradd --create-home --uid 10001 --shell /usr/sbin/nologin sleeve \
    && install -d -o sleeve -g sleeve /workspace
COPY --from=build /opt/moss-files /opt/moss-files
COPY docker/init.py docker/healthcheck.py /opt/moss-files/docker/
# NEEDLECAST_PEER_TOKEN_DIR names the folder where peer tokens are mounted as secrets; it holds
# no secret itself (hadolint flags the word TOKEN).
# hadolint ignore=DL3064
ENV PATH=/opt/moss-files/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    MOSS_ROOT=/workspace \
    NEEDLECAST_HOST=0.0.0.0 \
    NEEDLECAST_PORT=7471 \
    NEEDLECAST_PEER_TOKEN_DIR=/run/secrets/needlecast-peers
USER 10001:10001
WORKDIR /workspace
EXPOSE 7471 7681
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["/opt/moss-files/venv/bin/python", "-I", "/opt/moss-files/docker/healthcheck.py"]
ENTRYPOINT ["/opt/moss-files/venv/bin/python", "-I", "/opt/moss-files/docker/init.py"]
CMD ["needlecast", "sidecar"]
