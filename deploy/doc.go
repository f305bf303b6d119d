// Package deploy holds no code: it holds kjob's deployment artifacts
// (Dockerfile, docker-compose.yml at the repository root, kubernetes/ and
// SECURITY.md here), and its tests check them in CI: every Kubernetes
// manifest decodes strictly and keeps the invariants the README promises,
// and the compose file loads and wires its services as documented.
package deploy
