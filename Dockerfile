# syntax=docker/dockerfile:1
# The reconciler's image: one static binary on an empty base, run as a
# non-root user, with CA certificates for sslmode=verify-full, no shell.
#
#   docker build -t reconciler .
#   docker run --rm -e RECONCILER_STORE_URL=postgres://…?sslmode=verify-full \
#     -e RECONCILER_STATUS_LISTEN=0.0.0.0:9477 -e RECONCILER_STATUS_TOKEN_ENV=TOKEN -e TOKEN=… \
#     -p 9477:9477 reconciler
#
# The final stage is exactly what deploy/image/rootfs.sh lays out; the test
# deploy/image_test.go lays it out too and runs the daemon chrooted in it
# against PostgreSQL over TLS.
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static (no cgo), reproducible (-trimpath); version, commit and dirty flag
# from the build information (.git is in the context).
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=auto -ldflags "-s -w" -o /out/reconciler ./cmd/reconciler
RUN sh deploy/image/rootfs.sh /rootfs /out/reconciler /etc/ssl/certs/ca-certificates.crt deploy/image/extra-ca/*.crt

FROM scratch
COPY --from=build /rootfs/ /
COPY --from=build --chown=65532:65532 /rootfs/var/lib/reconciler/ /var/lib/reconciler/
USER 65532:65532
WORKDIR /var/lib/reconciler
EXPOSE 9477
ENTRYPOINT ["/reconciler", "run"]
