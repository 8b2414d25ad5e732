"""The service's clients of its collaborators: the Hub API, the Kubernetes API, Prometheus."""
