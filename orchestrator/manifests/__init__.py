"""Manifest stage: a valid plan -> Kubernetes objects, rendered from Jinja2 templates."""
