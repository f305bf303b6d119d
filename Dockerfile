# One image for all of kjob: /producer, /worker, /kjobctl and /healthcheck.
# The binaries share nearly all their code and dependencies, so one image is
# one build and one scan/sign/pull, and a producer and worker of the same tag
# always speak the same wire format; each Deployment or compose service picks
# its binary with the entrypoint/command. Checked by deploy/dockerfile_test.go;
# built and run by make test-containers, through the Docker engine's build API,
# which is why it uses no BuildKit-only syntax (RUN --mount cache mounts): the
# go.mod/go.sum layer still caches the module download.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
# go.mod replaces the embedded broker kfake with a patched copy there.
COPY third_party/ third_party/
RUN go mod download
COPY . .
# Static binaries (no cgo) for an image without libc.
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/ \
    ./cmd/producer ./cmd/worker ./cmd/kjobctl ./cmd/healthcheck

# distroless/static: no shell, no package manager, CA certificates and
# tzdata only; the nonroot variant runs as uid 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/worker"]
