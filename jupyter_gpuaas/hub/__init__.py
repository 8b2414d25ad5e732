"""Hub-side Kubernetes I/O shared by the spawner (in the hub process) and the gpuaas service.

It reads Kueue through ``kubernetes_asyncio`` (the ``hub`` extra) and is never imported by a
user's server, which holds no Kubernetes credentials (checked by ``lint-imports``).
"""
