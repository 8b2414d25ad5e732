"""The GPU console for ITOps (docs/console.md): pure aggregates over the service's state
(:mod:`.ledger`, :mod:`.journal`, :mod:`.aggregates`, :mod:`.preview`) and the page
(``static/``); the handlers are :mod:`gpuaas_service.web.console`."""
