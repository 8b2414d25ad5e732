"""jupyter_gpuaas/gpu"""
