"""The service's HTTP handlers: every one authenticated by the hub (docs/api.md)."""
