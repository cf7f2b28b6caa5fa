"""Deploy targets: files (dry run), a Kubernetes cluster, or a local process / Docker."""
