// Package deploy holds what an operator deploys beside the daemon — the
// container image (Dockerfile at the repository's root), Kubernetes
// manifests, a systemd unit, Prometheus alerting rules and a Grafana
// dashboard — and the tests that check each of them on this machine:
// promtool on the rules, kubectl kustomize and systemd-analyze on the
// manifests and the unit, the dashboard's and the rules' metric names
// against a live daemon's /metrics, the status page in headless Chromium,
// and the image's final stage laid out in an empty root and run there.
package deploy
