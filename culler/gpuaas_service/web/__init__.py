"""The service's HTTP side: the app (:mod:`.app`) over the typed context the service builds
once (:mod:`.context`), and the handlers of each part, every one authenticated by the hub or
by a token of its own (docs/api.md)."""
