"""Moving a user's running server to another offering: the way up to a bigger share and the
way down to a smaller one (``api/resize``, docs/api.md).

A notebook near its GPU memory cap can only go on on a bigger share. The user's server holds
no Kubernetes credentials, and its hub token cannot stop and start itself, so the sidebar asks
this service (through the server extension, with the server's own token, as for every request
only a server may make: :mod:`gpuaas_service.web.servers`; the endpoint is
:mod:`gpuaas_service.web.resize`):

- ``GET api/resize`` — the server's offering and the next size up with its headroom, or why
  there is none;
- ``POST api/resize`` (``{}`` or ``{"offering": SLUG}``) — checked as a spawn is checked
  (:func:`~jupyter_gpuaas.core.choice.read_server_choice`: the team's offerings, the count, image
  and size, the live headroom), and bigger than what runs; answered 202 at once, then the
  server is stopped through the Hub API (``delete:servers``; its home volume stays) and started
  again with the same choice on the bigger offering (``servers``; the spawner validates
  it again, and its progress page shows the queue position, as for any spawn).

The way down (docs/api.md): a session whose GPU-memory peak has stayed far below its share for
long is offered a smaller one (``down`` in ``GET api/resize``: :func:`.plan.way_down` decides,
with the thresholds of :class:`.plan.WayDownRule`), and ``POST api/resize`` with that offering
moves it there the same way. The peak is what the server's own activity reports said this
session (the usage recorder's open run): a smaller share is offered, never imposed.

:mod:`.plan` holds the decisions (pure); :mod:`.resizer` the Hub calls that carry a move out.
"""
