"""Code that runs inside the user's kernel: saving and restoring its variables.

The server extension asks a kernel to run it with a silent ``execute_request``
(:mod:`jupyter_gpuaas.server.kernel_requests`); nothing on the server or the hub imports it.
:mod:`.store` is the on-disk format and its checks, :mod:`.snapshot` saves a namespace,
:mod:`.restore` loads one back (docs/kernel-state.md).
"""
