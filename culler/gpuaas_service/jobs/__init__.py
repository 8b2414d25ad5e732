"""Notebooks as Kueue training Jobs (docs/jobs.md): the request's validation and the Job's
manifests (pure), and the service's side of submitting, following, cancelling and collecting."""
