"""Kubernetes cluster target, by what it does: `client` (the connection: kubeconfig, discovery,
reads, deadlines), `errors` (every answer as what/why/fix), `apply` (server-side apply and the
diff), `status` (readiness and why pods are not ready), `delete` (by profile labels), and
`cluster` (`KubernetesCluster`, all of them on one connection)."""
