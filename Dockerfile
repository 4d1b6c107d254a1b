# cpcreds serve, with the contrib providers (secretreader, gcp, spire). Build from the repository root:
#   docker build -t cpcreds:dev .
# Runs as an unprivileged user; the provider config is mounted at /etc/cpcreds/providers.yaml
# (see deploy/serve.yaml for the Deployment, RBAC and config).
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# Dependencies first, from the lock file (exact versions, every file checked against its sha256;
# scripts/lock.sh refreshes it): an image built today and one built next year run the same code.
COPY requirements.lock ./
RUN pip install --require-hashes -r requirements.lock
# Then cpcreds and the contrib providers themselves, without letting pip pick any other dependency.
COPY pyproject.toml README.md LICENSE ./
COPY src ./src
COPY plugins-contrib ./plugins-contrib
RUN pip install --no-deps . \
 && for plugin in plugins-contrib/*/; do \
      if [ -f "$plugin/pyproject.toml" ]; then pip install --no-deps "$plugin"; fi; \
    done \
 && pip check \
 && rm -rf /src

RUN useradd --system --uid 10001 --home-dir /var/lib/cpcreds --create-home cpcreds
USER 10001
WORKDIR /var/lib/cpcreds

EXPOSE 9733
ENTRYPOINT ["cpcreds", "serve"]
CMD ["--config", "/etc/cpcreds/providers.yaml", "--in-cluster", "--listen", "0.0.0.0:9733"]
