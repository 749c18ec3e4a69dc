# syntax=docker/dockerfile:1
# Both toolpool binaries in one small image, run as a non-root user.
#
#   docker build -t toolpool .
#   docker run --rm toolpool orchestrator --help
#   docker run --rm toolpool worker --help

FROM golang:1.26-alpine AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/orchestrator ./cmd/worker

FROM alpine:3.22
# ca-certificates: http_request and webhook tools reach HTTPS services.
RUN apk add --no-cache ca-certificates \
 && addgroup -S -g 10001 toolpool \
 && adduser -S -D -H -u 10001 -G toolpool toolpool \
 && mkdir -p /workspace /data \
 && chown toolpool:toolpool /workspace /data
COPY --from=build /out/orchestrator /out/worker /usr/local/bin/
COPY deploy/catalogs /etc/toolpool/catalogs
USER 10001:10001
WORKDIR /workspace
EXPOSE 8080 9464
ENTRYPOINT []
CMD ["orchestrator", "--help"]
