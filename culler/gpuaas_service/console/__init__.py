"""The GPU console for ITOps (docs/console.md): its own record of the reclaim loop, kept as one
of the loop's listeners (:mod:`.record`: the :mod:`.journal` and the :mod:`.ledger`), pure
aggregates (:mod:`.aggregates`, :mod:`.preview`, :mod:`.standing`), the answers built from
memory (:mod:`.state`) and the page (``static/``); the handlers are
:mod:`gpuaas_service.web.console`."""
