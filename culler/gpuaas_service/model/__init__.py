"""Plain data shared by the service's layers: it imports nothing of the service, so that the
clients and the reclaim loop can both name it without importing each other."""
